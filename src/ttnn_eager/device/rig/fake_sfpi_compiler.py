"""Stand-in for the sfpi RISC-V cross compiler `riscv-tt-elf-g++`, for a MOCK device only.

It compiles nothing. ttnn asks it `--version` (answered with the string ttnn 0.81.1 checks), runs compile
steps (`-o x.o`, optional `-MF deps`: an empty object and a make-style dependency file) and link steps
(`-o x.elf`: a placeholder RISC-V ELF32 holding one `ret`, with an empty `.rela.text` section that
tt-metal's XIP pass looks for). Kernels built this way never run: a mock device dispatches nothing.
"""
import struct
import sys

VERSION = "riscv-tt-elf-g++ (tenstorrent/sfpi:7.89.0[1050]) 15.1.0"


def placeholder_elf(text_addr: int) -> bytes:
    text = struct.pack("<I", 0x00008067)  # ret
    shstr = b"\0.text\0.rela.text\0.symtab\0.strtab\0.shstrtab\0"
    name = lambda s: shstr.index(s.encode() + b"\0")  # noqa: E731
    strtab, symtab = b"\0", b"\0" * 16
    ehsize, phsize, shsize = 52, 32, 40
    text_off = ehsize + phsize
    symtab_off = text_off + len(text)
    rela_off = strtab_off = symtab_off + len(symtab)
    shstr_off = strtab_off + len(strtab)
    sh_off = (shstr_off + len(shstr) + 3) & ~3
    ehdr = b"\x7fELF" + bytes([1, 1, 1, 0]) + b"\0" * 8
    ehdr += struct.pack("<HHIIIIIHHHHHH", 2, 243, 1, text_addr, ehsize, sh_off, 0, ehsize, phsize, 1, shsize, 6, 5)
    phdr = struct.pack("<IIIIIIII", 1, text_off, text_addr, text_addr, 4, 4, 5, 4)
    sections = [
        (0, 0, 0, 0, 0, 0, 0, 0, 0, 0),
        (name(".text"), 1, 6, text_addr, text_off, 4, 0, 0, 4, 0),
        (name(".rela.text"), 4, 0x40, 0, rela_off, 0, 3, 1, 4, 12),
        (name(".symtab"), 2, 0, 0, symtab_off, len(symtab), 4, 1, 4, 16),
        (name(".strtab"), 3, 0, 0, strtab_off, len(strtab), 0, 0, 1, 0),
        (name(".shstrtab"), 3, 0, 0, shstr_off, len(shstr), 0, 0, 1, 0),
    ]
    body = ehdr + phdr + text + symtab + strtab + shstr
    body += b"\0" * (sh_off - len(body))
    return body + b"".join(struct.pack("<IIIIIIIIII", *s) for s in sections)


def main(argv):
    if argv[:1] == ["--version"]:
        print(VERSION)
        return 0
    out = dep = src = None
    text_addr = 0
    for prev, arg in zip([""] + argv, argv):
        if prev == "-o":
            out = arg
        elif prev == "-MF":
            dep = arg
        elif arg.startswith("-Wl,--defsym=__kn_text="):
            text_addr = int(arg.split("=", 2)[2], 0)
        elif arg.endswith((".cpp", ".cc", ".S", ".h")):
            src = arg
    if out:
        with open(out, "wb") as f:
            f.write(placeholder_elf(text_addr) if out.endswith(".elf") else b"")
    if dep:
        with open(dep, "w") as f:
            f.write(f"{out}: {src or ''}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
