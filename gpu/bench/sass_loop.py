#!/usr/bin/env python3
"""sass_loop.py — the SASS of one loop of a kernel, block by block, for
counting the instructions per sample of the decoder's hot loop.

  sass_loop.py CUBIN KERNEL FILE:LINE [--nvdisasm PATH]

CUBIN: an sm_XX cubin (nvcc -cubin -arch=sm_90 -lineinfo ...). KERNEL: a
substring of the kernel's name (l3g_decode_planes). FILE:LINE: a source line
inside the loop (l3_tile.h:NNN). Prints the smallest loop (a backward branch
and its target) containing that line: each basic block's first offset, label,
size in instruction slots (16 bytes each on sm_70 and later; counted by
address, so instructions an older disassembler cannot name still count), the
source lines in it and the branch that ends it. The hot path is then read
off the table (which branches a sample takes). nvdisasm from CUDA 12.8 or
later reads the cubin as it is; an older one (e.g. Debian's 11.8) is handed
a copy with the pre-12.8 ELF header flags.
"""
import os, re, struct, subprocess, sys, tempfile


def disassemble(cubin, nvdisasm):
    data = bytearray(open(cubin, 'rb').read())
    if data[8] == 8:  # ELF ABI version 8 (CUDA >= 12.8): try as is, else the old header
        r = subprocess.run([nvdisasm, '-c', '-g', cubin], capture_output=True, text=True)
        if r.returncode == 0:
            return r.stdout
        sm = (struct.unpack_from('<I', data, 0x30)[0] >> 8) & 0xff
        data[8] = 7
        struct.pack_into('<I', data, 0x30, sm | 0x500 | (sm << 16))
    with tempfile.NamedTemporaryFile(suffix='.cubin', delete=False) as f:
        f.write(data)
    try:
        return subprocess.run([nvdisasm, '-c', '-g', f.name], capture_output=True, text=True,
                              check=True).stdout
    finally:
        os.unlink(f.name)


def parse(listing, kernel):
    ins, labels, cur, src = [], {}, None, None
    for line in listing.splitlines():
        m = re.match(r'\s*\.section\s+\.text\.(\S+?),', line)
        if m:
            cur = m.group(1)
            continue
        if cur is None or kernel not in cur:
            continue
        m = re.search(r'//## File "([^"]+)", line (\d+)', line)
        if m:
            src = (os.path.basename(m.group(1)), int(m.group(2)))
            continue
        m = re.match(r'^(\.L_x_\d+):', line)
        if m:
            labels[len(ins)] = m.group(1)
            continue
        m = re.match(r'\s+/\*([0-9a-f]{4,})\*/\s+(.*?)\s*;', line)
        if m:
            ins.append((int(m.group(1), 16), m.group(2), src))
    return ins, labels


def main():
    args = sys.argv[1:]
    nvdisasm = 'nvdisasm'
    if '--nvdisasm' in args:
        i = args.index('--nvdisasm')
        nvdisasm = args[i + 1]
        del args[i:i + 2]
    if len(args) != 3:
        sys.exit(__doc__)
    cubin, kernel, where = args
    wfile, wline = where.rsplit(':', 1)
    ins, labels = parse(disassemble(cubin, nvdisasm), kernel)
    if not ins:
        sys.exit('no kernel matching %r' % kernel)
    at = {name: i for i, name in labels.items()}
    loops = []
    for i, (_, text, _) in enumerate(ins):
        m = re.search(r'\bBRA\b.*?(\.L_x_\d+)', text)
        if m and m.group(1) in at and at[m.group(1)] <= i:
            loops.append((at[m.group(1)], i))
    inside = [(a, b) for a, b in loops
              if any(s == (wfile, int(wline)) for _, _, s in ins[a:b + 1])]
    if not inside:
        sys.exit('no loop contains %s' % where)
    a, b = min(inside, key=lambda ab: ab[1] - ab[0])
    print('loop %#x-%#x: %d slots' % (ins[a][0], ins[b][0], (ins[b][0] - ins[a][0]) // 16 + 1))
    blocks = []
    for i in range(a, b + 1):
        if i == a or i in labels or re.search(r'\b(BRA|EXIT|BSYNC|RET)\b', ins[i - 1][1]):
            blocks.append([i, i])
        blocks[-1][1] = i
    for s, e in blocks:
        lines = sorted({'%s:%d' % x for _, _, x in ins[s:e + 1] if x})
        end = ins[e][1] if re.search(r'\b(BRA|BSYNC|EXIT)\b', ins[e][1]) else ''
        print('%#07x %-9s %4d  %s  %s' % (ins[s][0], labels.get(s, ''),
                                          (ins[e][0] - ins[s][0]) // 16 + 1,
                                          ' '.join(lines), ('-> ' + end) if end else ''))


if __name__ == '__main__':
    main()
