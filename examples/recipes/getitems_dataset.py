#!/usr/bin/python3
"""Recipe: a torch Dataset whose __getitems__ decodes a whole batch into one
preallocated tensor.

PyTorch's DataLoader calls ``dataset.__getitems__(indices)`` for a batch when
the dataset has it; the collate function then receives what it returned. Here
that is one ``l3.decode_batch(bufs, out=x)`` call into a tensor allocated once
per batch (in shared memory inside a worker, so the main process gets it
without a copy). This is the whole mechanism behind l3.torch.ImageFolder, in
twenty lines, for a dataset of your own layout:

    files.txt lines: PATH.l3 LABEL

    getitems_dataset.py FILES.txt    prints the batches' shapes
"""
import sys

import torch
import torch.utils.data

import l3


class L3Files(torch.utils.data.Dataset):
    def __init__(self, items):          # items: [(path, label), ...], same image size
        self.items = items

    def __len__(self):
        return len(self.items)

    def __getitems__(self, indices):
        bufs = []
        for i in indices:
            with open(self.items[i][0], "rb") as f:
                bufs.append(f.read())
        info = l3.info(bufs[0])
        shape = (len(bufs), 3, info["height"], info["width"])
        if torch.utils.data.get_worker_info() is not None:
            # shared memory, as torch's default_collate allocates it in a worker
            st = torch.empty(0, dtype=torch.uint8).storage()._new_shared(
                shape[0] * shape[1] * shape[2] * shape[3])
            x = torch.empty(0, dtype=torch.uint8).new(st).resize_(shape)
        else:
            x = torch.empty(shape, dtype=torch.uint8)
        l3.decode_batch(bufs, out=x, layout="NCHW", dtype="uint8", channels=3,
                        threads=1, strict=True)
        y = torch.tensor([self.items[i][1] for i in indices])
        return x, y


def identity(batch):
    return batch


def loader(items, batch_size=2, workers=2):
    return torch.utils.data.DataLoader(L3Files(items), batch_size=batch_size,
                                       num_workers=workers, collate_fn=identity)


if __name__ == "__main__":
    items = [(p, int(c)) for p, c in (line.split() for line in open(sys.argv[1]))]
    for x, y in loader(items):
        print(tuple(x.shape), x.dtype, y.tolist())
