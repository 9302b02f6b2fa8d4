// libFuzzer target: the .eh_frame/.debug_frame decoder (the one decoder of DWARF CFI in the
// tree) on any bytes: both section kinds, both ABIs, both partial_input policies. What converts
// must be usable: rows from offset 0, sorted, inside the function; saved registers valid;
// re-encoding the converted functions as .eh_frame must succeed and decode to the same rows (the
// decoder and the encoder agree on everything the decoder accepts). With usable_rows on AMD64
// `.eh_frame`, jitwalk's use of it (parse_eh_frame, then the BPF walker's row layout) must give
// rows inside each function, in order.
#include <jitunwind/cfi.h>

#include "jitwalk/ehframe.hpp"

#include <cstdint>
#include <cstdlib>
#include <span>

using namespace jitunwind;

namespace {

void check_walker_rows(std::span<const uint8_t> section, uint64_t address) {
  auto r = jitwalk::parse_eh_frame(section, address);
  if (!r) return;
  for (const auto& f : r->functions)
    for (const auto& row : f.rows)
      if (row.pc_off >= (f.pcmask_rep ? f.pcmask_rep : f.size)) std::abort();
  auto rows = jitwalk::flatten(r->functions, 0);
  if (!rows) return;
  for (size_t i = 1; i < rows->rows.size(); ++i)
    if (rows->rows[i].pc_off <= rows->rows[i - 1].pc_off) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  cfi::decoder_options o;
  o.kind = (data[0] & 1) ? cfi::section_kind::debug_frame : cfi::section_kind::eh_frame;
  o.target = (data[0] & 2) ? abi::aarch64_le : abi::amd64;
  // k x 0x1008: an odd k puts the section at 8 mod 16, as a linker often does (the lazy PLT
  // entries then fall on 16-byte boundaries for an .eh_frame copied from such a file).
  o.section_address = 0x7f0000000000ull + ((data[0] >> 2) & 7) * 0x1008;
  if (data[0] & 0x20) o.partial = cfi::partial_input::usable_rows;
  if (data[0] & 0x40) o.text_address = 0x400000;
  if (data[0] & 0x80) o.data_address = 0x600000;
  const std::span<const uint8_t> section(data + 1, size - 1);
  if (o.partial == cfi::partial_input::usable_rows && o.target == abi::amd64 &&
      o.kind == cfi::section_kind::eh_frame)
    check_walker_rows(section, o.section_address);
  auto d = cfi::decode(section, o);
  if (!d) return 0;
  for (size_t i = 0; i < d->functions.size(); ++i) {
    const function_desc& f = d->functions[i];
    const uint32_t span = f.pcmask_rep ? f.pcmask_rep : f.size;
    if (f.rows.empty() || f.rows.front().pc_offset != 0 || f.rows.back().pc_offset >= span)
      std::abort();
    for (size_t k = 1; k < f.rows.size(); ++k)
      if (f.rows[k].pc_offset <= f.rows[k - 1].pc_offset) std::abort();
    if (i > 0 && d->functions[i - 1].start + d->functions[i - 1].size > f.start) std::abort();
  }
  // Functions that pass validate re-encode; the encoder writes what the decoder reads back (a
  // PCMASK function, the lazy PLT's entries, comes back as one function per block: left out).
  std::vector<function_desc> conforming;
  size_t next = 0;
  for (size_t i = 0; i < d->functions.size(); ++i) {
    if (next < d->nonconforming.size() && d->nonconforming[next].index == i) {
      ++next;
      continue;
    }
    if (d->functions[i].pcmask_rep != 0) continue;
    conforming.push_back(d->functions[i]);
  }
  cfi::encoder_options eo;
  eo.target = o.target;
  eo.encoding = cfi::address_encoding::absolute;  // any address: no ±2 GiB reach to respect
  auto enc = cfi::encoder::create(eo);
  if (!enc) std::abort();
  for (const function_desc& f : conforming)
    if (!enc->append(f)) std::abort();
  cfi::decoder_options back;
  back.target = o.target;
  auto again = cfi::decode(enc->data(), back);
  if (!again || again->functions.size() != conforming.size()) std::abort();
  for (size_t i = 0; i < conforming.size(); ++i)
    if (again->functions[i].rows != conforming[i].rows) std::abort();
  return 0;
}
