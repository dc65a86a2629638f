"""include/lmstream.h against the ctypes declarations: every function the
header declares is declared in lmstream._lib with the same argument and
result types, and nothing else is; the structs have the header's layout."""
import ctypes
import re

import pytest
from conftest import HEADER

from lmstream import _lib

# C type (whitespace-normalised) -> the ctypes type the binding must use.
SCALARS = {
    "void": None,
    "int": ctypes.c_int,
    "int32_t": ctypes.c_int32,
    "int64_t": ctypes.c_int64,
    "size_t": ctypes.c_size_t,
    "double": ctypes.c_double,
    "uint64_t": ctypes.c_uint64,
    "lms_runtime": ctypes.c_uint64,
    "lms_channel": ctypes.c_uint64,
    "lms_mux": ctypes.c_uint64,
    "lms_chunk": _lib.LmsChunk,
    "lms_usage": _lib.LmsUsage,
    "lms_pull_progress": _lib.LmsPullProgress,
    "lms_logprob": _lib.LmsLogprob,
    "lms_token_logprob": _lib.LmsTokenLogprob,
    "lms_tool_call_delta": _lib.LmsToolCallDelta,
    "lms_pull_progress_fn": _lib.lms_pull_progress_fn,
}


def strip_comments(text):
    return re.sub(r"/\*.*?\*/", " ", text, flags=re.S)


def header_text():
    with open(HEADER, encoding="utf-8") as f:
        return strip_comments(f.read())


def parse_functions(text):
    """name -> (return type, [param types]) for every function prototype."""
    text = re.sub(r"#[^\n]*", " ", text)
    text = re.sub(r"typedef[^;]*;", " ", text)  # typedefs, the handler included
    text = re.sub(r"\s+", " ", text)
    out = {}
    for m in re.finditer(r"([A-Za-z_][\w\s\*]*?)\b(lms_\w+)\s*\(([^)]*)\)\s*;", text):
        ret, name, params = m.group(1), m.group(2), m.group(3).strip()
        ret = ret.replace('extern "C" {', "").strip()
        if params in ("", "void"):
            plist = []
        else:
            plist = []
            for p in params.split(","):
                p = p.strip()
                # Drop the parameter name: the last identifier not part of the type.
                mm = re.match(r"^(.*?)([A-Za-z_]\w*)$", p)
                assert mm, p
                plist.append(mm.group(1).strip())
        out[name] = (ret, plist)
    return out


def ctype_of(decl, handler):
    """The ctypes type a C declaration maps to."""
    decl = decl.replace("const ", "").strip()
    stars = decl.count("*")
    base = decl.replace("*", "").strip()
    if base == "lms_chunk_handler" and stars == 0:
        return handler
    if base == "lms_progress_handler" and stars == 0:
        return _lib.lms_progress_handler
    if base == "char" and stars == 1:
        # const char * is a NUL-terminated input string; char * a buffer.
        return "char*"
    if base == "void" and stars == 1:
        return ctypes.c_void_p
    t = SCALARS[base]
    for _ in range(stars):
        t = ctypes.POINTER(t)
    return t


def same_type(want, got, const_char):
    if want == "char*":
        return got is (ctypes.c_char_p if const_char else ctypes.POINTER(ctypes.c_char))
    return want is got


FUNCS = parse_functions(header_text())


def test_header_parsed():
    assert len(FUNCS) >= 20
    assert "lms_channel_pop_batch" in FUNCS and "lms_abi_version" in FUNCS


def test_every_header_function_is_declared_and_nothing_else():
    assert sorted(FUNCS) == sorted(_lib.FUNCTIONS)


@pytest.mark.parametrize("name", sorted(FUNCS))
def test_signature(name):
    ret, params = FUNCS[name]
    restype, argtypes = _lib.FUNCTIONS[name]
    fn = getattr(_lib.lib, name)
    # What is set on the function object is what the table says.
    assert fn.restype is restype
    assert list(fn.argtypes) == list(argtypes)
    assert same_type(ctype_of(ret, _lib.lms_chunk_handler), restype, "const" in ret), \
        f"{name}: result {ret!r} declared as {restype}"
    assert len(params) == len(argtypes), f"{name}: {len(params)} parameters in the header"
    for i, (p, a) in enumerate(zip(params, argtypes)):
        assert same_type(ctype_of(p, _lib.lms_chunk_handler), a, "const" in p), \
            f"{name}: parameter {i} is {p!r} in the header, declared as {a}"


def test_handler_typedef():
    text = re.sub(r"\s+", " ", header_text())
    m = re.search(r"typedef (\w+) \(\*lms_chunk_handler\)\(([^)]*)\);", text)
    assert m
    proto = _lib.lms_chunk_handler
    assert proto._restype_ is SCALARS[m.group(1)]
    params = [re.match(r"^(.*?)([A-Za-z_]\w*)$", p.strip()).group(1).strip() for p in m.group(2).split(",")]
    assert [ctype_of(p, None) for p in params] == list(proto._argtypes_)


def test_progress_handler_typedef():
    text = re.sub(r"\s+", " ", header_text())
    m = re.search(r"typedef (\w+) \(\*lms_progress_handler\)\(([^)]*)\);", text)
    assert m
    proto = _lib.lms_progress_handler
    assert proto._restype_ is SCALARS[m.group(1)]
    params = [re.match(r"^(.*?)([A-Za-z_]\w*)$", p.strip()).group(1).strip() for p in m.group(2).split(",")]
    # The stage is a static input string: c_char_p, read during the call.
    assert [ctype_of(p, None) for p in params] == ["char*", ctypes.c_double, ctypes.c_void_p]
    assert list(proto._argtypes_) == [ctypes.c_char_p, ctypes.c_double, ctypes.c_void_p]


def test_pull_progress_typedef():
    text = re.sub(r"\s+", " ", header_text())
    m = re.search(r"typedef (\w+) \(\*lms_pull_progress_fn\)\(([^)]*)\);", text)
    assert m
    proto = _lib.lms_pull_progress_fn
    assert proto._restype_ is SCALARS[m.group(1)]
    params = [re.match(r"^(.*?)([A-Za-z_]\w*)$", p.strip()).group(1).strip() for p in m.group(2).split(",")]
    assert [ctype_of(p, None) for p in params] == list(proto._argtypes_)


def struct_fields(name):
    text = re.sub(r"\s+", " ", header_text())
    m = re.search(r"typedef struct %s \{(.*?)\} %s;" % (name, name), text)
    assert m, name
    out = []
    for decl in m.group(1).split(";"):
        decl = decl.strip()
        if decl:
            mm = re.match(r"^(.*?)([A-Za-z_]\w*)$", decl)
            out.append((mm.group(2), mm.group(1).strip()))
    return out


@pytest.mark.parametrize("name,cls", [("lms_usage", _lib.LmsUsage), ("lms_chunk", _lib.LmsChunk),
                                      ("lms_pull_progress", _lib.LmsPullProgress),
                                      ("lms_logprob", _lib.LmsLogprob),
                                      ("lms_token_logprob", _lib.LmsTokenLogprob),
                                      ("lms_tool_call_delta", _lib.LmsToolCallDelta)])
def test_struct_layout(name, cls):
    fields = struct_fields(name)
    assert [f for f, _ in fields] == [f for f, _ in cls._fields_]
    for (fname, decl), (_, ctype) in zip(fields, cls._fields_):
        want = ctype_of(decl, None)
        if want == "char*":
            # Text is read with its length, so it may be a void pointer.
            assert ctype in (ctypes.c_char_p, ctypes.c_void_p), fname
        else:
            assert want is ctype, f"{name}.{fname}: {decl!r} declared as {ctype}"


def test_constants_match_header():
    text = header_text()
    defines = dict(re.findall(r"#define (LMS_\w+)\s+\(?(-?\d+)\)?", text))
    assert int(defines["LMS_ABI_VERSION"]) == _lib.ABI_VERSION
    for k, v in defines.items():
        if k == "LMS_ABI_VERSION" or k.startswith("LMS_FINISH_"):
            continue
        assert getattr(_lib, k) == int(v), k
    from lmstream import FinishReason, QueuePolicy
    from lmstream.errors import ERRORS_BY_CODE
    for k, v in defines.items():
        if k.startswith("LMS_FINISH_"):
            assert FinishReason[k[len("LMS_FINISH_"):]] == int(v)
        if k.startswith("LMS_QUEUE_"):
            assert QueuePolicy[k[len("LMS_QUEUE_"):]] == int(v)
        if k.startswith("LMS_ERR_"):
            assert int(v) in ERRORS_BY_CODE, k
            assert ERRORS_BY_CODE[int(v)].ident == k[len("LMS_ERR_"):].lower(), k


def test_parser_sees_a_changed_signature():
    """The parser is not vacuous: a changed prototype parses differently."""
    text = header_text().replace("int lms_channel_set_interval(lms_channel ch, int32_t n);",
                                 "int lms_channel_set_interval(lms_channel ch, int64_t n);")
    ret, params = parse_functions(text)["lms_channel_set_interval"]
    assert ctype_of(params[1], None) is ctypes.c_int64 is not _lib.FUNCTIONS["lms_channel_set_interval"][1][1]


def test_abi_version_checked():
    assert _lib.lib.lms_abi_version() == _lib.ABI_VERSION
    assert _lib.strerror(_lib.LMS_ERR_FORKED) == "called in a forked child process"
