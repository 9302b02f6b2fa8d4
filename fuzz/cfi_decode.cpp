// libFuzzer target: the .eh_frame/.debug_frame decoder on any bytes (both section kinds, both
// ABIs). What converts must be usable: rows from offset 0, sorted, inside the function; saved
// registers valid; re-encoding the converted functions as .eh_frame must succeed and decode to
// the same rows (the decoder and the encoder agree on everything the decoder accepts).
#include <jitunwind/cfi.h>

#include <cstdint>
#include <cstdlib>
#include <span>

using namespace jitunwind;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  cfi::decoder_options o;
  o.kind = (data[0] & 1) ? cfi::section_kind::debug_frame : cfi::section_kind::eh_frame;
  o.target = (data[0] & 2) ? abi::aarch64_le : abi::amd64;
  o.section_address = 0x7f0000000000ull + ((data[0] >> 2) << 12);
  if (data[0] & 0x40) o.text_address = 0x400000;
  if (data[0] & 0x80) o.data_address = 0x600000;
  auto d = cfi::decode(std::span<const uint8_t>(data + 1, size - 1), o);
  if (!d) return 0;
  for (size_t i = 0; i < d->functions.size(); ++i) {
    const function_desc& f = d->functions[i];
    if (f.rows.empty() || f.rows.front().pc_offset != 0 || f.rows.back().pc_offset >= f.size)
      std::abort();
    for (size_t k = 1; k < f.rows.size(); ++k)
      if (f.rows[k].pc_offset <= f.rows[k - 1].pc_offset) std::abort();
    if (i > 0 && d->functions[i - 1].start + d->functions[i - 1].size > f.start) std::abort();
  }
  // Functions that pass validate re-encode; the encoder writes what the decoder reads back.
  std::vector<function_desc> conforming;
  size_t next = 0;
  for (size_t i = 0; i < d->functions.size(); ++i) {
    if (next < d->nonconforming.size() && d->nonconforming[next].index == i) {
      ++next;
      continue;
    }
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
