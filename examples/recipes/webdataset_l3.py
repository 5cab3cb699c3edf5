#!/usr/bin/python3
"""Recipe: .l3 members in WebDataset shards.

A WebDataset shard is a tar file whose members are grouped into samples by
their name without the extension (``0001.l3`` + ``0001.cls`` -> one sample with
keys "l3" and "cls"). WebDataset decodes each member with the first handler that
accepts its key; l3.torch.webdataset_handler() is one, a function of (key,
bytes) that decodes keys ending in "l3" and declines the others:

    import webdataset as wds, l3.torch
    ds = wds.WebDataset("shards/train-{0000..0099}.tar").decode(
        l3.torch.webdataset_handler(), "pil").to_tuple("l3", "cls")

WebDataset is not a Debian package, so the test of this recipe
(test_recipes.py) reads the shard with the standard library the way WebDataset
does -- samples() below -- and gives every member to the same handler chain;
with webdataset installed it also runs the pipeline above.

    webdataset_l3.py SHARD.tar     prints each sample's keys and image shape
"""
import sys
import tarfile

import l3.torch


def samples(path, handlers):
    """(key -> decoded value) per sample of a tar shard, as WebDataset groups
    and decodes them: members in order, grouped by the name up to the first
    dot of the file name, each value from the first handler that accepts
    the key (else the raw bytes)."""
    current, prefix = {}, None
    with tarfile.open(path) as tar:
        for m in tar:
            if not m.isfile():
                continue
            base, _, ext = m.name.partition(".")
            if prefix is not None and base != prefix:
                yield current
                current = {}
            prefix = base
            data = tar.extractfile(m).read()
            value = data
            for h in handlers:
                r = h("." + ext, data)
                if r is not None:
                    value = r
                    break
            current[ext] = value
    if current:
        yield current


def cls_handler(key, data):
    """WebDataset's handling of .cls members: an integer."""
    return int(data) if key.endswith("cls") else None


if __name__ == "__main__":
    for s in samples(sys.argv[1], [l3.torch.webdataset_handler(), cls_handler]):
        print({k: (tuple(v.shape), str(v.dtype)) if hasattr(v, "shape") else v
               for k, v in s.items()})
