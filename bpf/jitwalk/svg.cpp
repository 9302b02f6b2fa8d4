// Flame graph as a self-contained SVG: inline style, one <g> per frame with a <title> tooltip,
// and a short inline script for click-to-zoom (the graph is complete without it).
#include "jitwalk/profile_data.hpp"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <functional>
#include <map>
#include <memory>

namespace jitwalk {

namespace {

constexpr unsigned kFrameHeight = 17;
constexpr unsigned kTop = 58;     // title, subtitle, reset/details line
constexpr unsigned kBottom = 24;  // details line
constexpr unsigned kMargin = 10;
constexpr double kCharWidth = 6.6;  // 11px Verdana-ish, for label truncation
constexpr double kMinWidth = 0.25;  // px: narrower frames are not drawn

struct node {
  std::string name;
  frame_kind kind = frame_kind::unknown;
  bool synthetic = false;  // thread / cut markers
  uint64_t total = 0;
  std::map<std::string, std::unique_ptr<node>> children;
};

std::string escape(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&apos;";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          out += ' ';
        } else {
          out += c;
        }
    }
  }
  return out;
}

uint32_t name_hash(const std::string& s) {
  uint32_t h = 2166136261u;
  for (char c : s) h = (h ^ static_cast<uint8_t>(c)) * 16777619u;
  return h;
}

// Warm colours for native code, greens for JIT code, aqua for the kernel, greys otherwise.
std::string colour(const node& n) {
  const uint32_t h = name_hash(n.name);
  const double v1 = (h & 0xff) / 255.0, v2 = ((h >> 8) & 0xff) / 255.0;
  int r, g, b;
  if (n.synthetic) {
    r = g = b = 190 + static_cast<int>(30 * v1);
  } else {
    switch (n.kind) {
      case frame_kind::jit:
        r = static_cast<int>(50 + 60 * v1);
        g = static_cast<int>(170 + 60 * v2);
        b = static_cast<int>(50 + 40 * v1);
        break;
      case frame_kind::kernel:
        r = static_cast<int>(80 + 40 * v1);
        g = static_cast<int>(180 + 40 * v2);
        b = static_cast<int>(200 + 40 * v2);
        break;
      case frame_kind::native:
        r = 205 + static_cast<int>(50 * v2);
        g = static_cast<int>(60 + 150 * v1);
        b = static_cast<int>(40 + 40 * v2);
        break;
      default:
        r = g = b = 160 + static_cast<int>(40 * v1);
    }
  }
  return format("rgb(%d,%d,%d)", r, g, b);
}

const char* kScript = R"JS(
var svg = document.documentElement, W = +svg.getAttribute('width'), M = 10;
var frames = Array.prototype.slice.call(document.querySelectorAll('g.f'));
var details = document.getElementById('details');
function place(zx, zw, zd) {
  frames.forEach(function (g) {
    var x = +g.dataset.x, w = +g.dataset.w, d = +g.dataset.d;
    var r = g.querySelector('rect'), t = g.querySelector('text');
    var inside = x + w > zx + 1e-12 && x < zx + zw - 1e-12 && (d >= zd || (x <= zx && x + w >= zx + zw));
    var nx = Math.max(0, (x - zx) / zw), nw = Math.min(1, (x + w - zx) / zw) - nx;
    var px = M + nx * (W - 2 * M), pw = nw * (W - 2 * M);
    if (!inside || pw < 0.25) { g.style.display = 'none'; return; }
    g.style.display = '';
    r.setAttribute('x', px.toFixed(2)); r.setAttribute('width', pw.toFixed(2));
    t.setAttribute('x', (px + 3).toFixed(2));
    var name = g.dataset.n, max = Math.floor((pw - 6) / 6.6);
    t.textContent = max < 3 ? '' : (name.length > max ? name.slice(0, max - 2) + '..' : name);
  });
}
frames.forEach(function (g) {
  g.addEventListener('click', function () { place(+g.dataset.x, +g.dataset.w, +g.dataset.d); });
  g.addEventListener('mouseover', function () { details.textContent = g.querySelector('title').textContent; });
});
document.getElementById('reset').addEventListener('click', function () { place(0, 1, 0); });
)JS";

}  // namespace

std::string flamegraph_svg(const profile_data& p, const svg_options& o) {
  node root;
  root.name = "all";
  root.synthetic = true;
  unsigned max_depth = 1;
  for (const profile_stack& s : p.stacks()) {
    node* cur = &root;
    cur->total += s.count;
    auto step = [&](const std::string& name, frame_kind kind, bool synthetic) {
      auto& child = cur->children[name];
      if (!child) {
        child = std::make_unique<node>();
        child->name = name;
        child->kind = kind;
        child->synthetic = synthetic;
      }
      cur = child.get();
      cur->total += s.count;
    };
    step(s.thread, frame_kind::unknown, true);
    unsigned depth = 2;
    for (auto it = s.frames.rbegin(); it != s.frames.rend(); ++it, ++depth) {
      const profile_frame& f = p.frames()[*it];
      bool marker = !f.name.empty() && f.name[0] == '[' && f.name.rfind("[cut", 0) == 0;
      step(marked_name(f), f.kind, marker);
    }
    max_depth = std::max(max_depth, depth);
  }

  const unsigned width = std::max(300u, o.width);
  const unsigned height = kTop + (max_depth + 1) * kFrameHeight + kBottom;
  const double usable = width - 2.0 * kMargin;
  const double total = root.total ? static_cast<double>(root.total) : 1.0;

  std::string svg;
  svg += format(
      "<?xml version=\"1.0\" standalone=\"no\"?>\n"
      "<svg version=\"1.1\" width=\"%u\" height=\"%u\" viewBox=\"0 0 %u %u\" "
      "xmlns=\"http://www.w3.org/2000/svg\">\n",
      width, height, width, height);
  svg +=
      "<style>text{font-family:Verdana,sans-serif;font-size:11px;fill:#000}"
      "g.f rect{stroke:#fff;stroke-width:0.5;rx:2;ry:2}g.f:hover rect{stroke:#000}"
      ".title{font-size:17px;text-anchor:middle}.sub{font-size:12px;fill:#555;text-anchor:middle}"
      "#reset{cursor:pointer;fill:#036}</style>\n";
  svg += format("<rect x=\"0\" y=\"0\" width=\"%u\" height=\"%u\" fill=\"#f8f8f0\"/>\n", width,
                height);
  svg += format("<text class=\"title\" x=\"%u\" y=\"22\">%s</text>\n", width / 2,
                escape(o.title).c_str());
  if (!o.subtitle.empty()) {
    svg += format("<text class=\"sub\" x=\"%u\" y=\"40\">%s</text>\n", width / 2,
                  escape(o.subtitle).c_str());
  }
  svg += format("<text id=\"reset\" x=\"%u\" y=\"40\">Reset zoom</text>\n", kMargin);
  svg += format("<text id=\"details\" x=\"%u\" y=\"%u\"> </text>\n", kMargin, height - 8);

  // Depth-first layout; root at the bottom.
  std::function<void(const node&, double, unsigned)> draw = [&](const node& n, double x0,
                                                                unsigned depth) {
    const double w = n.total / total;
    const double px = kMargin + x0 * usable, pw = w * usable;
    if (pw < kMinWidth) return;
    const unsigned y = height - kBottom - (depth + 1) * kFrameHeight;
    const double pct = 100.0 * n.total / total;
    std::string label;
    size_t max_chars = pw > 6 ? static_cast<size_t>((pw - 6) / kCharWidth) : 0;
    if (max_chars >= 3) {
      label = n.name.size() > max_chars ? n.name.substr(0, max_chars - 2) + ".." : n.name;
    }
    std::string kind = n.synthetic ? "" : std::string(" [") + to_string(n.kind) + "]";
    if (!n.synthetic && n.name.ends_with(fp_mark)) kind += " found by the frame-pointer fallback";
    if (!n.synthetic && n.name.ends_with(sp_mark))
      kind += " found from the return address at the stack pointer";
    svg += format(
        "<g class=\"f\" data-x=\"%.9f\" data-w=\"%.9f\" data-d=\"%u\" data-n=\"%s\">"
        "<title>%s%s — %llu samples (%.2f%%)</title>"
        "<rect x=\"%.2f\" y=\"%u\" width=\"%.2f\" height=\"%u\" fill=\"%s\"/>"
        "<text x=\"%.2f\" y=\"%u\">%s</text></g>\n",
        x0, w, depth, escape(n.name).c_str(), escape(n.name).c_str(), kind.c_str(),
        static_cast<unsigned long long>(n.total), pct, px, y, pw, kFrameHeight - 1,
        colour(n).c_str(), px + 3, y + kFrameHeight - 5, escape(label).c_str());
    // Children sorted by name (alphabetical, like flamegraph.pl), laid out left to right.
    double cx = x0;
    for (const auto& [name, child] : n.children) {
      draw(*child, cx, depth + 1);
      cx += child->total / total;
    }
  };
  draw(root, 0.0, 0);
  svg += "<script type=\"text/ecmascript\"><![CDATA[";
  svg += kScript;
  svg += "]]></script>\n</svg>\n";
  return svg;
}

result<void> write_svg(const profile_data& p, const svg_options& o, const std::string& path) {
  return write_output(path, flamegraph_svg(p, o));
}

}  // namespace jitwalk
