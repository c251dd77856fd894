"""The ELF loader (refimpl/backends/elf.py): real clang objects (run on the host; aarch64 ones decoded), and hand-built
objects that pin every relocation formula, the entry jump, externs, and every refusal.

Rule of each relocation (S symbol, A addend, P place, B load address; all from the ELF psABIs):
  x86-64  PC32/PLT32 S+A-P (int32), PC64 S+A-P, 64 B+S+A, 32 B+S+A (uint32), 32S B+S+A (int32),
          GOTPCREL*: `mov` relaxed to `lea` with S+A-P, other forms read a GOT slot holding B+S.
  aarch64 ADRP: Page(B+S+A)-Page(B+P) >> 12; ADD/LDST lo12: (B+S+A) & 0xfff >> log2(size); branches (S+A-P) >> 2;
          PREL32/64 S+A-P; ABS64 B+S+A; GOT_PAGE/LD64_GOT_LO12 relaxed to ADRP/ADD of S.
"""
import platform
import struct

import numpy as np
import pytest

from refimpl.backends.elf import ElfError, load_elf, parse_sections, parse_symbols
from refimpl.device import CompileError, CPUProgram, DeviceError

try:
  from refimpl.backends.ops_clang import ClangCompiler, ClangProgram, find_clang
  find_clang()
  HAVE_CLANG = True
except DeviceError:
  HAVE_CLANG = False
needs_clang = pytest.mark.skipif(not HAVE_CLANG, reason="no clang and no ziglang here (pip install ziglang)")

HOST = platform.machine().lower()
HOST_ARCH = {"x86_64": "x86_64", "amd64": "x86_64", "aarch64": "aarch64", "arm64": "aarch64"}.get(HOST)


# ***** a minimal ELF64 relocatable writer, for hand-built objects *****

def make_elf(machine: int, sections: list[tuple], symbols: list[tuple], relas: dict[str, list[tuple]] | None = None,
             *, ei_class: int = 2, ei_data: int = 1, e_type: int = 1, rel_type: int = 4) -> bytes:
  """sections: (name, sh_type, flags, data or size for NOBITS, align); symbols: (name, section name | "UND" | "ABS",
  value, info), index 0 (the null symbol) is added; relas: target section -> [(offset, symbol index, type, addend)]."""
  names = [s[0] for s in sections]
  out = bytearray(64)
  offs = []
  for _name, typ, _flags, data, align in sections:
    out += b"\0" * (-len(out) % max(align, 1))
    offs.append(len(out))
    if typ != 8: out += data
  strtab = bytearray(b"\0")
  symtab = bytearray(struct.pack("<IBBHQQ", 0, 0, 0, 0, 0, 0))
  for name, sec, value, info in symbols:
    shndx = 0 if sec == "UND" else 0xfff1 if sec == "ABS" else names.index(sec) + 1
    symtab += struct.pack("<IBBHQQ", len(strtab), info, 0, shndx, value, 0)
    strtab += name.encode() + b"\0"
  extra = [(".symtab", 2, symtab, 8), (".strtab", 3, bytes(strtab), 1)]
  for target, rs in (relas or {}).items():
    body = b"".join(struct.pack("<QQq", o, (k << 32) | t, a) if rel_type == 4 else struct.pack("<QQ", o, (k << 32) | t)
                    for o, k, t, a in rs)
    extra.append(((".rela" if rel_type == 4 else ".rel") + target, rel_type, body, 8))
  shstr = bytearray(b"\0")
  def sname(n):
    shstr.extend(n.encode() + b"\0")
    return len(shstr) - len(n) - 1
  headers = [struct.pack("<IIQQQQIIQQ", *([0] * 10))]
  for (name, typ, flags, data, align), off in zip(sections, offs):
    headers.append(struct.pack("<IIQQQQIIQQ", sname(name), typ, flags, 0, off, data if typ == 8 else len(data), 0, 0, align, 0))
  symtab_index, strtab_index = len(sections) + 1, len(sections) + 2
  for name, typ, data, align in extra:
    out += b"\0" * (-len(out) % align)
    link = strtab_index if typ == 2 else symtab_index if typ in (4, 9) else 0
    info = len(symbols) + 1 if typ == 2 else names.index(name[5 if typ == 4 else 4:]) + 1 if typ in (4, 9) else 0
    entsize = {2: 24, 4: 24, 9: 16}.get(typ, 0)
    headers.append(struct.pack("<IIQQQQIIQQ", sname(name), typ, 0, 0, len(out), len(data), link, info, align, entsize))
    out += data
  shstrndx, shname = len(headers), sname(".shstrtab")
  headers.append(struct.pack("<IIQQQQIIQQ", shname, 3, 0, 0, len(out), len(shstr), 0, 0, 1, 0))
  out += shstr
  out += b"\0" * (-len(out) % 8)
  shoff = len(out)
  for h in headers: out += h
  ident = b"\x7fELF" + bytes([ei_class, ei_data, 1]) + b"\0" * 9
  out[:64] = struct.pack("<16sHHIQQQIHHHHHH", ident, e_type, machine, 1, 0, 0, shoff, 0, 64, 0, 0, 64, len(headers), shstrndx)
  return bytes(out)

X86, A64 = 62, 183
TEXT, RODATA = (2 | 4), 2  # SHF_ALLOC|SHF_EXECINSTR, SHF_ALLOC
FUNC, OBJECT, SECTION = 0x12, 0x11, 0x03  # GLOBAL FUNC, GLOBAL OBJECT, LOCAL SECTION

def u32(b: bytes, at: int) -> int: return struct.unpack_from("<I", b, at)[0]
def i32(b: bytes, at: int) -> int: return struct.unpack_from("<i", b, at)[0]
def u64(b: bytes, at: int) -> int: return struct.unpack_from("<Q", b, at)[0]


# ***** x86-64 relocation formulas on hand-built objects *****

def x86_object(rtype: int, addend: int, code: bytes = b"\x90" * 32, at: int = 8, sym: str = "data") -> bytes:
  """.text (k at 0) with one relocation at `at` against `data` (in .rodata at offset 4)."""
  return make_elf(X86, [(".text", 1, TEXT, code, 16), (".rodata", 1, RODATA, b"\xaa" * 4 + b"\x11\x22\x33\x44" + b"\0" * 8, 16)],
                  [("k", ".text", 0, FUNC), ("data", ".rodata", 4, OBJECT), ("ext", "UND", 0, 0x10)],
                  {".text": [(at, 2 if sym == "data" else 3, rtype, addend)]})

def test_x86_pc32_and_plt32_are_s_plus_a_minus_p():
  for rtype in (2, 4):
    li = load_elf(x86_object(rtype, -4), "k")
    S, P = li.sections[".rodata"] + 4, li.sections[".text"] + 8
    assert i32(li.image, P) == S - 4 - P
    assert li.image[li.sections[".rodata"] + 4:li.sections[".rodata"] + 8] == b"\x11\x22\x33\x44"  # the data came along

def test_x86_pc64_is_s_plus_a_minus_p_in_64_bits():
  li = load_elf(x86_object(24, 3), "k")
  assert struct.unpack_from("<q", li.image, 8)[0] == li.sections[".rodata"] + 4 + 3 - 8

def test_x86_absolute_relocations_need_the_load_address():
  for rtype, fmt in ((1, "<Q"), (10, "<I"), (11, "<i")):
    with pytest.raises(ElfError, match="needs the image's load address"): load_elf(x86_object(rtype, 5), "k")
    base = 0x40000000
    li = load_elf(x86_object(rtype, 5), "k", base=base)
    assert struct.unpack_from(fmt, li.image, 8)[0] == base + li.sections[".rodata"] + 4 + 5

def test_x86_32s_refuses_an_address_that_does_not_sign_extend():
  with pytest.raises(ElfError, match="does not fit"): load_elf(x86_object(11, 0), "k", base=0x7fff_ffff_0000)

def test_x86_gotpcrel_mov_is_relaxed_to_lea():
  code = bytearray(b"\x90" * 32)
  code[5:8] = b"\x48\x8b\x05"  # mov rax, [rip + disp32] with the disp32 at 8
  for rtype in (9, 41, 42):
    li = load_elf(x86_object(rtype, -4, bytes(code)), "k")
    assert li.image[6] == 0x8d and li.got_entries == 0  # lea rax, [rip + disp32]
    assert i32(li.image, 8) == li.sections[".rodata"] + 4 - 4 - 8

def test_x86_gotpcrel_other_forms_use_a_got_slot_with_the_absolute_address():
  code = bytearray(b"\x90" * 32)
  code[6:8] = b"\xff\x15"  # call [rip + disp32]
  with pytest.raises(ElfError, match="GOT entry"): load_elf(x86_object(42, -4, bytes(code)), "k")
  base = 0x10000
  li = load_elf(x86_object(42, -4, bytes(code)), "k", base=base)
  assert li.got_entries == 1 and li.image[6:8] == b"\xff\x15"
  slot = 8 + i32(li.image, 8) + 4  # where the call reads: P + 4 + disp
  assert slot == len(li.image) - 8 and u64(li.image, slot) == base + li.sections[".rodata"] + 4

def test_x86_pc32_overflow_is_refused():
  with pytest.raises(ElfError, match="does not fit"): load_elf(x86_object(2, 1 << 31), "k")


# ***** aarch64 relocation formulas on hand-built objects *****

ADRP, ADD, LDR64, B, BL, BCOND, TBZ = 0x90000000, 0x91000000, 0xf9400000, 0x14000000, 0x94000000, 0x54000000, 0x36000000

def a64_object(rtype: int, insn: int, addend: int = 0, data_off: int = 0x10, text_pad: int = 0, target: str = "data") -> bytes:
  """.text: NOPs with `insn` at 8 relocated against `target`: data (in .rodata at data_off) or fn (.text at 16)."""
  code = bytearray(struct.pack("<I", 0xd503201f) * (8 + text_pad))
  struct.pack_into("<I", code, 8, insn)
  return make_elf(A64, [(".text", 1, TEXT, bytes(code), 16), (".rodata", 1, RODATA, bytes(range(64)) * 80, 16)],
                  [("k", ".text", 0, FUNC), ("data", ".rodata", data_off, OBJECT), ("fn", ".text", 16, FUNC)],
                  {".text": [(8, 2 if target == "data" else 3, rtype, addend)]})

def adrp_imm(insn: int) -> int:
  imm = ((insn >> 29) & 3) | (((insn >> 5) & 0x7ffff) << 2)
  return imm - (1 << 21) if imm & (1 << 20) else imm

def test_a64_adrp_gets_the_page_difference():
  for rtype in (275, 276, 311):
    for data_off in (0x10, 0x1230):  # the second lands on the next page of the image
      li = load_elf(a64_object(rtype, ADRP | 3, 0x8, data_off), "k")
      S = li.sections[".rodata"] + data_off + 0x8
      insn = u32(li.image, 8)
      assert (insn & 0x9f00001f) == ADRP | 3  # opcode and register kept
      assert adrp_imm(insn) == (S >> 12) - (8 >> 12)
  base = 0x7000_1000  # with a load address the pages are those of the absolute addresses
  li = load_elf(a64_object(275, ADRP, 0, 0x10), "k", base=base)
  assert adrp_imm(u32(li.image, 8)) == ((base + li.sections[".rodata"] + 0x10) >> 12) - ((base + 8) >> 12)

def test_a64_lo12_fields_are_scaled_by_the_access_size():
  for rtype, scale in ((277, 0), (278, 0), (284, 1), (285, 2), (286, 3), (299, 4)):
    li = load_elf(a64_object(rtype, LDR64 | (5 << 5) | 7, 0, 0x30), "k")
    lo = (li.sections[".rodata"] + 0x30) & 0xfff
    insn = u32(li.image, 8)
    assert (insn >> 10) & 0xfff == lo >> scale and insn & 0x3ff == (5 << 5) | 7

def test_a64_misaligned_lo12_is_refused():
  with pytest.raises(ElfError, match="not aligned"): load_elf(a64_object(286, LDR64, 0, 0x31), "k")

def test_a64_branches_get_the_word_offset():
  for rtype, insn, bits, shift in ((282, B, 26, 0), (283, BL, 26, 0), (280, BCOND | 1, 19, 5), (279, TBZ | 2, 14, 5)):
    li = load_elf(a64_object(rtype, insn, 4, target="fn"), "k")
    got = (u32(li.image, 8) >> shift) & ((1 << bits) - 1)
    assert got == ((16 + 4 - 8) >> 2) and u32(li.image, 8) & ~(((1 << bits) - 1) << shift) == insn

def test_a64_prel_and_abs_data_relocations():
  li = load_elf(a64_object(261, 0, 2), "k")
  assert u32(li.image, 8) == li.sections[".rodata"] + 0x10 + 2 - 8
  li = load_elf(a64_object(260, 0, 2), "k")
  assert u64(li.image, 8) == li.sections[".rodata"] + 0x10 + 2 - 8
  with pytest.raises(ElfError, match="load address"): load_elf(a64_object(257, 0, 2), "k")
  li = load_elf(a64_object(257, 0, 2), "k", base=0x5000)
  assert u64(li.image, 8) == 0x5000 + li.sections[".rodata"] + 0x10 + 2

def test_a64_got_load_is_relaxed_to_an_add():
  li = load_elf(a64_object(312, LDR64 | (4 << 5) | 9, 0, 0x28), "k")
  insn = u32(li.image, 8)
  assert (insn & 0xffc003ff) == ADD | (4 << 5) | 9 and (insn >> 10) & 0xfff == (li.sections[".rodata"] + 0x28) & 0xfff


# ***** entry, externs, refusals *****

def test_entry_not_at_offset_zero_gets_a_jump_header():
  obj = make_elf(X86, [(".text", 1, TEXT, b"\xc3" * 8 + b"\x90" * 8, 16)],
                 [("helper", ".text", 0, FUNC), ("k", ".text", 8, FUNC)])
  li = load_elf(obj, "k")
  assert li.entry_offset == li.sections[".text"] + 8 and li.image[0] == 0xe9 and i32(li.image, 1) == li.entry_offset - 5
  assert load_elf(obj, "helper").entry_offset == 0 and load_elf(obj, "helper").image[:1] == b"\xc3"  # no header needed
  li = load_elf(make_elf(A64, [(".text", 1, TEXT, b"\0" * 16, 16)], [("k", ".text", 12, FUNC)]), "k")
  assert u32(li.image, 0) == B | (li.entry_offset >> 2)

def test_sections_are_laid_out_code_then_rodata_then_data_then_bss():
  obj = make_elf(X86, [(".data", 1, 3, b"\x01" * 4, 8), (".bss", 8, 3, 64, 32), (".rodata", 1, RODATA, b"\x02" * 3, 4),
                       (".text", 1, TEXT, b"\xc3", 16)], [("k", ".text", 0, FUNC)])
  li = load_elf(obj, "k")
  s = li.sections
  assert s[".text"] == 0 < s[".rodata"] < s[".data"] < s[".bss"] and s[".bss"] % 32 == 0 and s[".data"] % 8 == 0
  assert li.image[s[".data"]:s[".data"] + 4] == b"\x01" * 4 and li.image[s[".bss"]:s[".bss"] + 64] == b"\0" * 64

def test_unresolved_external_symbol_is_refused_by_name():
  with pytest.raises(ElfError, match="CLANG: kernel needs external symbol 'ext' which refimpl does not provide"):
    load_elf(x86_object(4, -4, sym="ext"), "k", who="CLANG")

def test_external_address_is_used_only_with_a_load_address():
  with pytest.raises(ElfError, match="load address"): load_elf(x86_object(4, -4, sym="ext"), "k", externs={"ext": 0x9000})
  li = load_elf(x86_object(4, -4, sym="ext"), "k", externs={"ext": 0x9000}, base=0x1000)
  assert i32(li.image, 8) == 0x9000 - 4 - (0x1000 + 8)

def test_external_code_blob_is_appended_and_linked():
  li = load_elf(x86_object(4, -4, sym="ext"), "k", externs={"ext": b"\xc3\xc3"})
  at = 8 + 4 + i32(li.image, 8)
  assert at % 16 == 0 and li.image[at:at + 2] == b"\xc3\xc3"

@pytest.mark.parametrize("obj, match", [
  (b"not an elf at all" * 8, "not an ELF"),
  (make_elf(X86, [(".text", 1, TEXT, b"\xc3", 16)], [("k", ".text", 0, FUNC)], ei_class=1), "not ELF64"),
  (make_elf(X86, [(".text", 1, TEXT, b"\xc3", 16)], [("k", ".text", 0, FUNC)], ei_data=2), "not little-endian"),
  (make_elf(X86, [(".text", 1, TEXT, b"\xc3", 16)], [("k", ".text", 0, FUNC)], e_type=2), "not a relocatable object"),
  (make_elf(40, [(".text", 1, TEXT, b"\xc3", 16)], [("k", ".text", 0, FUNC)]), "machine 40 is not supported"),
  (make_elf(X86, [(".text", 1, TEXT, b"\xc3" * 16, 16)], [("k", ".text", 0, FUNC)], {".text": [(4, 1, 19, 0)]}),
   "unsupported x86-64 relocation type 19 at .text"),
  (make_elf(A64, [(".text", 1, TEXT, b"\0" * 16, 16)], [("k", ".text", 0, FUNC)], {".text": [(4, 1, 300, 0)]}),
   "unsupported aarch64 relocation type 300"),
  (make_elf(X86, [(".text", 1, TEXT, b"\xc3" * 16, 16)], [("k", ".text", 0, FUNC)], {".text": [(4, 1, 2, 0)]}, rel_type=9),
   "REL relocations"),
  (make_elf(X86, [(".text", 1, TEXT, b"\xc3" * 16, 16)], [("k", ".text", 0, FUNC)], {".text": [(14, 1, 2, 0)]}),
   "outside its section"),
  (make_elf(X86, [(".text", 1, TEXT, b"\xc3", 16)], [("other", ".text", 0, FUNC)]), "no function 'k' in the object"),
])
def test_malformed_or_unsupported_objects_are_refused_clearly(obj, match):
  with pytest.raises(ElfError, match=match): load_elf(obj, "k")


# ***** real objects from clang *****

def compile_c(src: str, arch: str | None = None) -> bytes:
  return ClangCompiler(arch=arch or HOST_ARCH, native=arch is None).compile(src)

TABLE_SRC = """
static const float table[8] = {1.5f, -2.25f, 3.0f, 0.125f, 1e10f, -7.5f, 0.3f, 42.0f};
__attribute__((noinline)) static float scale(float x, int i) { return x * table[i & 7] + 0.1f; }
void k(float* restrict out, const float* restrict in, int n) { for (int i = 0; i < n; i++) out[i] = scale(in[i], i); }
"""

def expected_table(x: np.ndarray) -> np.ndarray:
  table = np.array([1.5, -2.25, 3.0, 0.125, 1e10, -7.5, 0.3, 42.0], np.float32)
  return x * table[np.arange(len(x)) & 7] + np.float32(0.1)

@needs_clang
@pytest.mark.skipif(HOST_ARCH is None, reason=f"no loader for {HOST}")
def test_rodata_table_and_helper_call_run_on_the_host():
  li = load_elf(obj := compile_c(TABLE_SRC), "k")
  assert li.relocations > 0 and ".rodata" in "".join(li.sections)
  prg = CPUProgram("k", li.image)
  x = np.linspace(-3, 3, 37, dtype=np.float32)
  out = np.zeros_like(x)
  prg(x.ctypes.data, out.ctypes.data, vals=(0,))  # n = 0: nothing written
  assert (out == 0).all()
  prg(out.ctypes.data, x.ctypes.data, vals=(len(x),))
  np.testing.assert_array_equal(out, expected_table(x))
  assert not [s for s in parse_symbols(obj, parse_sections(obj)[1])[1:] if s.shndx == 0]  # nothing external

@needs_clang
@pytest.mark.skipif(HOST_ARCH is None, reason=f"no loader for {HOST}")
def test_default_visibility_global_goes_through_the_got_and_is_relaxed():
  src = """__attribute__((visibility("default"))) const int tbl[4] = {7, -11, 13, 1 << 30};
__attribute__((visibility("default"))) void k(int* restrict out) { for (int i = 0; i < 4; i++) out[i] = tbl[3 - i] + i; }"""
  obj = compile_c(src)
  li = load_elf(obj, "k")
  assert li.got_entries == 0  # relaxed (x86-64: mov -> lea; aarch64: the GOT LDR -> ADD)
  out = np.zeros(4, np.int32)
  CPUProgram("k", li.image)(out.ctypes.data)
  assert out.tolist() == [(1 << 30) + 0, 13 + 1, -11 + 2, 7 + 3]

@needs_clang
@pytest.mark.skipif(HOST_ARCH is None, reason=f"no loader for {HOST}")
def test_extern_helper_object_linked_in_as_code():
  helper = load_elf(compile_c("int triple(int x) { return 3 * x + 1; }"), "triple").image
  obj = compile_c("int triple(int);\nvoid k(int* restrict o) { o[0] = triple(o[0]) + triple(o[1]); }")
  with pytest.raises(ElfError, match="external symbol 'triple'"): load_elf(obj, "k")
  o = np.array([5, 7], np.int32)
  CPUProgram("k", load_elf(obj, "k", externs={"triple": helper}).image)(o.ctypes.data)
  assert o[0] == (3 * 5 + 1) + (3 * 7 + 1)

@needs_clang
def test_clang_program_refuses_a_libm_call_clearly():
  obj = compile_c("float sinf(float);\nvoid k_k(float* restrict o) { o[0] = sinf(o[0]); }")  # k_: cstyle.kernel_symbol
  with pytest.raises(CompileError, match="CLANG: kernel needs external symbol 'sinf' which refimpl does not provide"):
    ClangProgram("k", obj)

def a64_decode_targets(img: bytes) -> tuple[set[int], set[int]]:
  """(addresses formed by ADRP + ADD/LDR/STR lo12 pairs on one register, targets of BL), image-relative (base 0)."""
  pages: dict[int, int] = {}
  addrs, calls = set(), set()
  for at in range(0, len(img) - 3, 4):
    insn = u32(img, at)
    if (insn & 0x9f000000) == ADRP: pages[insn & 0x1f] = (at & ~0xfff) + (adrp_imm(insn) << 12)
    elif (insn & 0xff800000) == ADD and (insn >> 5) & 0x1f in pages:
      addrs.add(pages[(insn >> 5) & 0x1f] + ((insn >> 10) & 0xfff))
    elif (insn & 0x3b000000) == 0x39000000 and (insn >> 5) & 0x1f in pages:  # LDR/STR (immediate, unsigned offset)
      size = insn >> 30 if (insn & 0x04000000) == 0 else (4 if (insn >> 30) == 0 and (insn >> 23) & 1 else insn >> 30)
      addrs.add(pages[(insn >> 5) & 0x1f] + (((insn >> 10) & 0xfff) << size))
    elif (insn & 0xfc000000) == BL:
      off = insn & 0x3ffffff
      calls.add(at + 4 * (off - (1 << 26) if off & (1 << 25) else off))
  return addrs, calls

A64_SRC = """
static const double dtab[4] = {0.1, 0.3, 1e300, 0.7};
__attribute__((noinline)) double scale(double x, int i) { return x * dtab[i & 3]; }
void k(double* restrict out, int n) { for (int i = 0; i < n; i++) out[i] = scale(out[i], i) + 0.2; }
"""

@needs_clang
def test_aarch64_object_relocations_point_at_the_constants_and_the_helper():
  try: obj = compile_c(A64_SRC, arch="aarch64")
  except CompileError as e: pytest.skip(f"this clang cannot target aarch64: {str(e)[:200]}")
  assert parse_sections(obj)[0] == A64
  li = load_elf(obj, "k")
  img = li.image
  addrs, calls = a64_decode_targets(img)
  table = np.array([0.1, 0.3, 1e300, 0.7]).tobytes()
  assert any(img[a:a + 32] == table for a in addrs), "no ADRP + ADD pair addresses the constant table"
  assert any(img[a:a + 8] == np.float64(0.2).tobytes() for a in addrs), "no ADRP + LDR pair addresses the constant 0.2"
  if li.entry_offset:  # the jump header goes to the kernel
    assert (u32(img, 0) & 0xfc000000) == B and (u32(img, 0) & 0x3ffffff) * 4 == li.entry_offset
  assert li.symbols["scale"] in calls  # BL (CALL26) lands on the helper
