#!/usr/bin/env python3
"""The C API cannot drift from the C++ API, nor the bindings from the C API.

usage: drift.py SOURCE_DIR          check the tree; every problem is printed, exit status 1
       drift.py SOURCE_DIR --self-test
                                    the check finds a C++ option, rule and builder directive
                                    added without a C counterpart, and bindings that differ

What is checked (docs/c-api.md, "How the C API keeps up"):
- every field of the C++ options structs (session, windows, SFrame encoder, USDT provider,
  trampoline pool) and of the frame model (frame_row, saved_register, function_desc,
  recipes::epilogue) has its field in the C struct;
- every enumerator of the C++ rule and option enums has its C constant, with the same value;
- every frame_builder directive and recipe, every window and session member function and every
  on-ramp function has its C function;
- the Python package (python/jitunwind): each C function it declares has the C prototype's
  types, each ctypes structure it passes has the C struct's fields and types in order, its
  FrameBuilder has a method per C builder directive, its constants have the C values, its
  SONAME is the headers' and python/pyproject.toml's version the library's;
- the LuaJIT module (lua/jitunwind.lua): its ffi.cdef declares each function and struct as the
  C headers do, and it loads the headers' SONAME.

C++ items with no C counterpart are listed below with the reason; anything else missing fails.
The C headers and the C++ headers are read as text: they are written in a regular style
(.clang-format), which this reader relies on and checks (it fails when it finds nothing).
"""

import ast
import ctypes
import os
import re
import shutil
import sys
import tempfile

# ---- what the C API deliberately does not carry, and why ---------------------------------------

OMITTED = {
    "session_options.log": "a log sink is a C function pointer and its user pointer: log + log_user + log_min_level",
    "provider_options.log": "a log sink is a C function pointer and its user pointer: log + log_user + log_min_level",
    "function_desc.signal_frame": "JITUNWIND_FUNCTION_SIGNAL_FRAME in jitunwind_function.flags",
    "abi::s390x": "s390x is read as data only (decoded, dumped): nothing in the C API generates or unwinds it",
    "errc::ok": "JITUNWIND_OK",
    "session::options": "a C caller keeps the options it passed; jitunwind_session_publisher_state reports what started",
}

# C++ names that the C API spells differently (not just jitunwind_<object>_<name>).
FIELD_RENAMES = {
    "session_options.target": "abi",
    "session_options.flush_latency": "flush_latency_ms",
    "session_options.reuse": "address_reuse",
    "encoder_options.target": "abi",
    "frame_row.cfa": "cfa_base",
    "frame_row.ra": "ra_rule",
    "frame_row.fp": "fp_rule",
}
ENUMERATOR_RENAMES = {
    "address_reuse::automatic": "JITUNWIND_ADDRESS_REUSE_AUTO",
    "errc::io_error": "JITUNWIND_E_IO",
    "arg_type::pointer": "JITUNWIND_USDT_PTR",
    "arg_type::string": "JITUNWIND_USDT_STR",
}
FUNCTION_RENAMES = {
    "window::state": "jitunwind_window_get_state",
    "window::owned": "jitunwind_window_is_owned",
    "window::functions": "jitunwind_window_functions",
    "session::create": "jitunwind_session_create",
    "session::status": "jitunwind_session_publisher_state",
    "set_default_session_log": "jitunwind_default_session_log",
}

# C++ struct (header, qualified name) -> C struct.
STRUCTS = [
    ("window.h", "session_options", "jitunwind_session_options"),
    ("window.h", "owned_window_options", "jitunwind_owned_window_options"),
    ("window.h", "described_window_options", "jitunwind_described_window_options"),
    ("sframe.h", "encoder_options", "jitunwind_sframe_encoder_options"),
    ("usdt.h", "provider_options", "jitunwind_usdt_provider_options"),
    ("trampolines.h", "trampoline_pool_options", "jitunwind_trampoline_pool_options"),
    ("frame.h", "frame_row", "jitunwind_frame_row"),
    ("frame.h", "saved_register", "jitunwind_saved_register"),
    ("frame.h", "function_desc", "jitunwind_function"),
    ("frame.h", "epilogue", "jitunwind_epilogue"),
]

# C++ enum (header, name) -> prefix of its C constants (C name = prefix + NAME.upper()).
ENUMS = [
    ("frame.h", "abi", "JITUNWIND_ABI_"),
    ("frame.h", "reg", "JITUNWIND_REG_"),
    ("frame.h", "cfa_base", "JITUNWIND_CFA_"),
    ("frame.h", "ra_rule", "JITUNWIND_RA_"),
    ("frame.h", "fp_rule", "JITUNWIND_FP_"),
    ("frame.h", "saved_rule", "JITUNWIND_SAVED_"),
    ("window.h", "publisher", "JITUNWIND_PUBLISH_"),
    ("window.h", "address_reuse", "JITUNWIND_ADDRESS_REUSE_"),
    ("window.h", "durability", "JITUNWIND_DURABILITY_"),
    ("window.h", "publisher_state", "JITUNWIND_PUBLISHER_"),
    ("window.h", "window_state", "JITUNWIND_WINDOW_"),
    ("window.h", "code_layout", "JITUNWIND_LAYOUT_"),
    ("sframe.h", "stop_reason", "JITUNWIND_STOP_"),
    ("usdt.h", "arg_type", "JITUNWIND_USDT_"),
    ("usdt.h", "object_location", "JITUNWIND_USDT_"),
    ("result.h", "errc", "JITUNWIND_E_"),
]
# C values that are the negated C++ ones (statuses).
NEGATED = {"errc"}

# ---- reading C and C++ declarations ------------------------------------------------------------


def strip_comments(text):
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    return re.sub(r"//[^\n]*", "", text)


def canonical_type(decl):
    """The type of a parameter or field declaration, without qualifiers and name:
    "const jitunwind_frame_row* rows" -> "jitunwind_frame_row*"; function pointers -> "fnptr"."""
    d = decl.strip()
    if "(*" in d.replace(" ", ""):
        return "fnptr"
    d = re.sub(r"\b(const|volatile|struct)\b", " ", d)
    d = re.sub(r"\s*\*\s*", "* ", d)
    tokens = d.split()
    if len(tokens) > 1 and re.fullmatch(r"[A-Za-z_]\w*", tokens[-1]):
        tokens = tokens[:-1]  # the name
    return "".join(t if t.endswith("*") else t + " " for t in tokens).strip().replace(" *", "*")


def split_top(text, sep=","):
    parts, depth, cur = [], 0, ""
    for ch in text:
        depth += ch in "([{"
        depth -= ch in ")]}"
        if ch == sep and depth == 0:
            parts.append(cur)
            cur = ""
        else:
            cur += ch
    if cur.strip():
        parts.append(cur)
    return [p.strip() for p in parts]


class CModel:
    """Functions, structs and constants of C declarations (the headers, or a LuaJIT cdef)."""

    def __init__(self, text, api_macro=True):
        text = strip_comments(text)
        text = re.sub(r"^\s*#(?!define\s+JITUNWIND_)[^\n]*(\\\n[^\n]*)*", "", text, flags=re.M)
        self.functions, self.structs, self.constants, self.typedefs = {}, {}, {}, {}
        for m in re.finditer(r"#define\s+(JITUNWIND_\w+)\s+\(?(0x[0-9a-fA-F]+|\d+)u?\)?\s*$",
                             text, re.M):
            self.constants[m.group(1)] = int(m.group(2), 0)
        text = re.sub(r"^\s*#[^\n]*(\\\n[^\n]*)*", "", text, flags=re.M)
        for m in re.finditer(r"typedef\s+struct\s+(\w+)\s*\{(.*?)\}\s*(\w+)\s*;", text, re.S):
            fields = []
            for stmt in split_top(m.group(2), ";"):
                if not stmt:
                    continue
                head = re.match(r"(.*?[\s*])(\w+(\s*\[\s*\d+\s*\])?)\s*(,|$)", stmt, re.S)
                base = head.group(1)
                base_type = canonical_type(base + " x")
                for declarator in split_top(stmt[len(base):]):
                    dm = re.fullmatch(r"(\**)\s*(\w+)\s*(?:\[\s*(\d+)\s*\])?", declarator.strip())
                    if not dm:
                        continue
                    t = base_type + dm.group(1)
                    if dm.group(3):
                        t += "[%s]" % dm.group(3)
                    fields.append((dm.group(2), t))
            self.structs[m.group(3)] = fields
        for m in re.finditer(r"typedef\s+enum\s*\w*\s*\{[^}]*\}\s*(\w+)\s*;", text):
            self.typedefs[m.group(1)] = "enum"
        for m in re.finditer(r"\benum\s*(\w*)\s*\{(.*?)\}", text, re.S):
            value = -1
            for item in split_top(m.group(2)):
                im = re.fullmatch(r"(\w+)\s*(?:=\s*(.+))?", item.strip(), re.S)
                if not im:
                    continue
                value = self.evaluate(im.group(2)) if im.group(2) else value + 1
                self.constants[im.group(1)] = value
        for m in re.finditer(r"typedef\s+([^;{}()]+?)\s+(\w+)\s*;", text):
            self.typedefs[m.group(2)] = canonical_type(m.group(1) + " x")
        for m in re.finditer(r"typedef\s+[^;{}]*?\(\s*\*\s*(\w+)\s*\)\s*\([^;]*\)\s*;", text):
            self.typedefs[m.group(1)] = "fnptr"
        pattern = (r"JITUNWIND_API\s+([^;{}()]*?)\b(jitunwind_\w+)\s*\(" if api_macro else
                   r"(?:^|;)\s*([A-Za-z_][^;{}()=]*?)\b(jitunwind_\w+)\s*\(")
        for m in re.finditer(pattern, text, re.M):
            if "typedef" in m.group(1):
                continue
            start = m.end()
            depth, i = 1, start
            while depth:
                depth += text[i] == "("
                depth -= text[i] == ")"
                i += 1
            params = split_top(text[start:i - 1])
            params = [] if params == ["void"] else [canonical_type(p) for p in params]
            self.functions[m.group(2)] = (canonical_type(m.group(1) + " x"), params)

    def evaluate(self, expr):
        expr = expr.strip().rstrip("u").replace("1u <<", "1 <<").replace("u)", ")")
        expr = re.sub(r"(\d)u\b", r"\1", expr)
        for name, v in self.constants.items():
            expr = re.sub(r"\b%s\b" % name, str(v), expr)
        return eval(expr, {"__builtins__": {}})  # integer literals and shifts of our headers


def cxx_block(text, opener):
    """The body of the first `opener {` ... matching `}` in C++ text (comments stripped)."""
    m = re.search(opener + r"\s*\{", text)
    if not m:
        return None
    depth, i = 1, m.end()
    while depth:
        depth += text[i] == "{"
        depth -= text[i] == "}"
        i += 1
    return text[m.end():i - 1]


def cxx_fields(body):
    """Data members of a struct body (depth 0 statements that are not functions)."""
    fields = []
    for stmt in split_top(body, ";"):
        stmt = stmt.strip()
        if not stmt or "operator" in stmt or "(" in stmt.split("=")[0].split("{")[0] or re.match(
                r"(static|using|friend|struct|enum|class|template)\b", stmt):
            continue
        stmt = re.sub(r"\{[^{}]*\}$", "", re.sub(r"=.*$", "", stmt, flags=re.S)).strip()
        name = re.search(r"(\w+)\s*$", stmt)
        if name:
            fields.append(name.group(1))
    return fields


def cxx_enum(text, name):
    body = cxx_block(text, r"enum\s+class\s+%s\b[^{;]*" % name)
    if body is None:
        return None
    values, value = {}, -1
    for item in split_top(body):
        m = re.fullmatch(r"(\w+)\s*(?:=\s*(.+))?", item.strip(), re.S)
        if m:
            value = eval(re.sub(r"(\d)u\b", r"\1", m.group(2)), {"__builtins__": {}}) \
                if m.group(2) else value + 1
            values[m.group(1)] = value
    return values


def cxx_methods(body, class_name):
    """Public member functions of a class body: names of depth-0 declarations with a '('."""
    names, public = [], False
    for stmt in re.split(r";|\}", re.sub(r"\{[^{}]*\}", ";", re.sub(r"\{[^{}]*\}", ";", body))):
        for label in re.findall(r"\b(public|private|protected)\s*:", stmt):
            public = label == "public"
        stmt = re.sub(r".*\b(public|private|protected)\s*:", "", stmt, flags=re.S).strip()
        m = re.search(r"(~?\w+)\s*\(", stmt)
        if not public or not m or re.match(r"(struct|enum|using|friend)\b", stmt):
            continue
        name = m.group(1)
        if name in (class_name, "~" + class_name) or name.startswith("operator") or \
                "operator" in stmt[:m.start()] or name == "JITUNWIND_API":
            continue
        names.append(name)
    return list(dict.fromkeys(names))


# ---- the checks ----------------------------------------------------------------------------------


class Checker:
    def __init__(self, root):
        self.root = root
        self.problems = []
        inc = os.path.join(root, "sdk/include/jitunwind")
        self.c = CModel("\n".join(open(os.path.join(inc, "c", f)).read()
                                  for f in sorted(os.listdir(os.path.join(inc, "c")))))
        self.cxx = {f: strip_comments(open(os.path.join(inc, f)).read())
                    for f in os.listdir(inc) if f.endswith(".h")}
        config = open(os.path.join(inc, "config.h")).read()
        self.soversion = int(re.search(r"#define JITUNWIND_SOVERSION (\d+)", config).group(1))
        self.version = re.search(r'#define JITUNWIND_VERSION_STRING "([^"]+)"', config).group(1)
        if len(self.c.functions) < 100 or len(self.c.structs) < 15:
            self.fail(f"read only {len(self.c.functions)} C functions and {len(self.c.structs)} "
                      "structs from jitunwind/c/*.h: the reader no longer understands them")

    def fail(self, message):
        self.problems.append(message)

    def check_structs(self):
        for header, name, c_name in STRUCTS:
            body = cxx_block(self.cxx[header], r"struct\s+%s" % name)
            c_fields = [f for f, _ in self.c.structs.get(c_name, [])]
            if body is None or not c_fields:
                self.fail(f"{header}: struct {name} or C struct {c_name} not found")
                continue
            for field in cxx_fields(body):
                key = f"{name}.{field}"
                if key in OMITTED:
                    continue
                if FIELD_RENAMES.get(key, field) not in c_fields:
                    self.fail(f"C++ {name}::{field} ({header}) has no field in {c_name} "
                              f"(add it, or say why in tests/capi/drift.py OMITTED)")

    def check_enums(self):
        for header, name, prefix in ENUMS:
            values = cxx_enum(self.cxx[header], name)
            if not values:
                self.fail(f"{header}: enum class {name} not found")
                continue
            for enumerator, value in values.items():
                key = f"{name}::{enumerator}"
                if key in OMITTED:
                    continue
                c_name = ENUMERATOR_RENAMES.get(key, prefix + enumerator.upper())
                want = -value if name in NEGATED else value
                if c_name not in self.c.constants:
                    self.fail(f"C++ {key} ({header}) has no C constant {c_name}")
                elif self.c.constants[c_name] != want:
                    self.fail(f"{c_name} is {self.c.constants[c_name]}, C++ {key} is {value}")

    def need_function(self, cxx_name, c_name, where):
        if cxx_name in OMITTED:
            return
        c_name = FUNCTION_RENAMES.get(cxx_name, c_name)
        if c_name not in self.c.functions:
            self.fail(f"C++ {cxx_name} ({where}) has no C function {c_name}")

    def check_functions(self):
        frame = self.cxx["frame.h"]
        directives = re.findall(r"frame_builder&\s+(\w+)\s*\(", cxx_block(
            frame, r"class\s+JITUNWIND_API\s+frame_builder").split("private:")[0])
        recipes = set(re.findall(r"JITUNWIND_API\s+result<[^>]*>\s+(\w+)\s*\(",
                                 cxx_block(frame, r"namespace\s+recipes")))
        if len(directives) < 12 or len(recipes) < 4:
            self.fail(f"frame.h: found {len(directives)} directives and {len(recipes)} recipes")
        for d in directives:
            self.need_function(f"frame_builder::{d}", f"jitunwind_frame_{d}", "frame.h")
        for r in recipes:
            self.need_function(f"recipes::{r}", f"jitunwind_frame_recipe_{r}", "frame.h")
        window = self.cxx["window.h"]
        for cls in ("window", "session"):
            methods = cxx_methods(cxx_block(window, r"class\s+JITUNWIND_API\s+%s\b" % cls), cls)
            if len(methods) < 8:
                self.fail(f"window.h: found only {methods} in class {cls}")
            for m in methods:
                self.need_function(f"{cls}::{m}", f"jitunwind_{cls}_{m}", "window.h")
        onramp = self.cxx["onramp.h"]
        for f in re.findall(r"JITUNWIND_API\s+(?:result<[^>]*>|void)\s+(\w+)\s*\(", onramp):
            self.need_function(f, f"jitunwind_{f}", "onramp.h")

    # ---- bindings ----

    def c_ctype(self, t):
        """The ctypes type a binding must use for C type `t` (None: void; "struct:X*": a pointer
        to a structure mirroring X; "any-pointer": c_void_p or a function type)."""
        base = self.c.typedefs.get(t, t)
        scalars = {"int": ctypes.c_int, "uint8_t": ctypes.c_uint8, "uint16_t": ctypes.c_uint16,
                   "uint32_t": ctypes.c_uint32, "int32_t": ctypes.c_int32,
                   "uint64_t": ctypes.c_uint64, "size_t": ctypes.c_size_t}
        if t == "void":
            return None
        if t in scalars:
            return scalars[t]
        if base == "enum":
            return ctypes.c_int
        if t == "char*":
            return ctypes.c_char_p
        if base == "fnptr":
            return "any-pointer"
        if t.endswith("*"):
            inner = t[:-1]
            if inner in self.c.structs:
                return f"struct:{inner}*"
            if inner in scalars:
                return ctypes.POINTER(scalars[inner])
            return "any-pointer"  # void*, opaque handles, handle out-parameters
        return "?" + t

    def matches(self, want, got, python_structs):
        if isinstance(want, str) and want.startswith("struct:"):
            if not (isinstance(got, type) and issubclass(got, ctypes._Pointer) and
                    issubclass(got._type_, ctypes.Structure)):
                return False
            python_structs.setdefault(want[7:-1], got._type_)
            return True
        if want == "any-pointer":
            return got is ctypes.c_void_p or (isinstance(got, type) and (
                issubclass(got, ctypes._CFuncPtr) or issubclass(got, ctypes._Pointer)))
        if isinstance(want, type) and issubclass(want, ctypes._Pointer):
            return isinstance(got, type) and issubclass(got, ctypes._Pointer) and \
                got._type_ is want._type_
        return want is got or (want is ctypes.c_int and got is ctypes.c_int32)

    def field_ctype(self, t):
        m = re.fullmatch(r"(.+)\[(\d+)\]", t)
        if m:
            inner = self.field_ctype(m.group(1))
            return (inner, int(m.group(2)))
        if t.endswith("*") and t[:-1] in self.c.structs:
            return f"struct:{t[:-1]}*"
        if t == "char":
            return ctypes.c_char
        return self.c_ctype(t)

    def check_python_struct(self, c_name, cls):
        want = self.c.structs[c_name]
        got = getattr(cls, "_fields_", [])
        if [n for n, _ in got] != [n for n, _ in want]:
            self.fail(f"python {cls.__name__}: fields {[n for n, _ in got]}, C {c_name} has "
                      f"{[n for n, _ in want]}")
            return
        for (name, t), (_, gt) in zip(want, got):
            w = self.field_ctype(t)
            if isinstance(w, tuple):
                ok = issubclass(gt, ctypes.Array) and gt._length_ == w[1] and \
                    self.matches(w[0], gt._type_, {})
            else:
                ok = self.matches(w, gt, {})
            if not ok:
                self.fail(f"python {cls.__name__}.{name}: {gt.__name__}, C {c_name}.{name} is {t}")

    def python_namespace(self):
        """The package's classes, constants and _signatures() without loading the library."""
        path = os.path.join(self.root, "python/jitunwind/__init__.py")
        tree = ast.parse(open(path).read(), path)
        keep = [n for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom, ast.ClassDef,
                                                       ast.Assign))
                and not (isinstance(n, ast.Assign) and any(
                    isinstance(t, ast.Name) and t.id == "library" for t in n.targets))]
        keep += [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "_signatures"]
        ns = {"__name__": "jitunwind_drift"}
        exec(compile(ast.Module(body=keep, type_ignores=[]), path, "exec"), ns)
        return ns

    def check_python(self):
        ns = self.python_namespace()
        if ns.get("SOVERSION") != self.soversion:
            self.fail(f"python: SOVERSION {ns.get('SOVERSION')}, jitunwind/config.h says "
                      f"{self.soversion}")
        pyproject = os.path.join(self.root, "python/pyproject.toml")
        if os.path.exists(pyproject):
            m = re.search(r'^version = "([^"]+)"', open(pyproject).read(), re.M)
            if not m or m.group(1) != self.version:
                self.fail(f"python/pyproject.toml: version {m and m.group(1)}, jitunwind/config.h "
                          f"says {self.version}")
        sigs = ns["_signatures"]()
        structs = {}
        for name, (restype, argtypes) in sigs.items():
            if name not in self.c.functions:
                self.fail(f"python declares {name}, which the C headers do not")
                continue
            ret, params = self.c.functions[name]
            if len(params) != len(argtypes):
                self.fail(f"python {name}: {len(argtypes)} arguments, C has {len(params)}")
                continue
            if not (self.c_ctype(ret) is None and restype is None) and \
                    not self.matches(self.c_ctype(ret), restype, structs):
                self.fail(f"python {name}: returns {restype}, C returns {ret}")
            for i, (p, a) in enumerate(zip(params, argtypes)):
                if not self.matches(self.c_ctype(p), a, structs):
                    self.fail(f"python {name}: argument {i + 1} is {getattr(a, '__name__', a)}, "
                              f"C has {p}")
        for c_name, cls in structs.items():
            self.check_python_struct(c_name, cls)
        if "jitunwind_error" not in structs or "jitunwind_function" not in structs:
            self.fail("python: found no structure passed for jitunwind_error/jitunwind_function")
        builder = ns["FrameBuilder"]
        for f, (_, params) in self.c.functions.items():
            d = f[len("jitunwind_frame_"):]
            if f.startswith("jitunwind_frame_") and params[:1] == ["jitunwind_frame_builder*"] \
                    and not d.startswith(("builder_", "recipe_")):
                if not callable(getattr(builder, d, None)):
                    self.fail(f"python FrameBuilder has no {d}() for {f}")
        for const, value in ns.items():
            c_name = "JITUNWIND_" + const
            if re.fullmatch(r"[A-Z][A-Z0-9_]+", const) and isinstance(value, int) and \
                    c_name in self.c.constants and self.c.constants[c_name] != value:
                self.fail(f"python {const} = {value}, C {c_name} = {self.c.constants[c_name]}")
        for prefix in ("REG_", "CFA_", "RA_", "FP_", "SAVED_", "PUBLISH_", "LAYOUT_", "ABI_"):
            if not any(k.startswith(prefix) for k in ns):
                self.fail(f"python: no {prefix}* constants")

    def check_lua(self):
        text = open(os.path.join(self.root, "lua/jitunwind.lua")).read()
        m = re.search(r"ffi\.cdef\s*\[\[(.*?)\]\]", text, re.S)
        if not m:
            self.fail("lua/jitunwind.lua: no ffi.cdef [[...]] block")
            return
        lua = CModel(m.group(1), api_macro=False)
        if not lua.functions:
            self.fail("lua/jitunwind.lua: no function read from the cdef")
        for name, (ret, params) in lua.functions.items():
            if name not in self.c.functions:
                self.fail(f"lua declares {name}, which the C headers do not")
                continue
            cret, cparams = self.c.functions[name]
            lua_types = [ret] + params
            c_types = [cret] + cparams
            if len(lua_types) != len(c_types):
                self.fail(f"lua {name}: {len(params)} parameters, C has {len(cparams)}")
                continue
            for lt, ct in zip(lua_types, c_types):
                if not self.same_c_type(lt, ct, lua):
                    self.fail(f"lua {name}: {lt} where C has {ct}")
        for name, fields in lua.structs.items():
            if self.c.structs.get(name) != fields:
                self.fail(f"lua struct {name}: {fields}, C has {self.c.structs.get(name)}")
        if f"libjitunwind.so.{self.soversion}" not in text or re.search(
                r"libjitunwind\.so\.(?!%d\b)\d+" % self.soversion, text):
            self.fail(f"lua/jitunwind.lua does not load libjitunwind.so.{self.soversion}")

    def same_c_type(self, lua_type, c_type, lua):
        if lua_type == c_type:
            return True
        lt = lua.typedefs.get(lua_type, lua_type)
        ct = self.c.typedefs.get(c_type, c_type)
        if lt == ct or (lt == "int" and ct == "enum"):
            return True
        # A callback or handle the module never calls through: void* is the same pointer.
        return lua_type == "void*" and (ct == "fnptr" or c_type.endswith("*"))

    def run(self):
        self.check_structs()
        self.check_enums()
        self.check_functions()
        self.check_python()
        self.check_lua()
        return self.problems


def self_test(root):
    """Adds an option, a rule, a directive and a Python/Lua difference to a copy of the tree:
    each must be reported."""
    with tempfile.TemporaryDirectory() as tmp:
        for d in ("sdk/include", "python/jitunwind", "lua"):
            shutil.copytree(os.path.join(root, d), os.path.join(tmp, d))

        def patch(rel, old, new):
            p = os.path.join(tmp, rel)
            s = open(p).read()
            assert old in s, (rel, old)
            open(p, "w").write(s.replace(old, new, 1))

        patch("sdk/include/jitunwind/window.h", "  bool sframe_allow_flex = true;",
              "  bool sframe_allow_flex = true;\n  bool drift_new_option = false;")
        patch("sdk/include/jitunwind/frame.h", "  register_saved = 4,",
              "  register_saved = 4,\n  drift_new_rule = 5,")
        patch("sdk/include/jitunwind/frame.h", "  frame_builder& remember_state();",
              "  frame_builder& remember_state();\n  frame_builder& drift_directive(uint32_t at);")
        patch("python/jitunwind/__init__.py", '("fp_offset", ctypes.c_int32),\n        ("reserved"',
              '("fp_offset", ctypes.c_uint32),\n        ("reserved"')
        patch("python/jitunwind/__init__.py", "    def remember_state(self):",
              "    def drift_renamed(self):")
        patch("lua/jitunwind.lua", "const jitunwind_described_window_options* options,",
              "uint64_t text_start, size_t text_size,")
        problems = Checker(tmp).run()
    expected = ["session_options::drift_new_option", "ra_rule::drift_new_rule",
                "frame_builder::drift_directive", "FrameRow.fp_offset", "remember_state()",
                "lua jitunwind_session_describe_window"]
    missing = [e for e in expected if not any(e in p for p in problems)]
    for p in problems:
        print("found:", p)
    if missing:
        print("drift self-test: not reported:", ", ".join(missing))
        return 1
    print(f"drift self-test: all {len(expected)} differences reported")
    return 0


def main():
    root = sys.argv[1]
    if sys.argv[2:] == ["--self-test"]:
        return self_test(root)
    problems = Checker(root).run()
    for p in problems:
        print("drift:", p)
    if problems:
        return 1
    print("drift: the C API covers the C++ options, rules and directives; python/ and lua/ "
          "match the C headers")
    return 0


if __name__ == "__main__":
    sys.exit(main())
