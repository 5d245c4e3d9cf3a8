"""The same GCN in PyTorch Geometric: the W1-full baseline of ``benchmarks.speed``.

Runs in its own venv (``benchmarks.speed`` creates it: torch CPU and
torch_geometric, see ``PYG_REQUIREMENTS`` there), never imported by the
project. PyG's ``examples/gcn.py`` setting, as the GCN paper trains: Cora's
public split from the Planetoid files, ``NormalizeFeatures``, GCNConv
1433 -> 16 (relu) -> 7, dropout 0.5 before each layer, Adam lr 0.01 with weight
decay 5e-4 on the first layer, 200 full-batch epochs, a validation forward pass
every epoch; the test accuracy of the epoch with the lowest validation loss.

  python benchmarks/pyg_gcn.py --data-dir ../shared/data/planetoid --seed 0 --work-dir /tmp/x

Prints one JSON line: train_s (model build to the end of the last epoch),
first_step_s, ms_per_step (median epoch after warm-up), val/test accuracy,
process_s (from interpreter start) and peak_rss_mb.
"""

import argparse
import json
import os
import resource
import shutil
import statistics
import sys
import time

PROCESS_START = time.time()

import torch  # pylint: disable=g-import-not-at-top,wrong-import-position
import torch.nn.functional as F  # pylint: disable=g-import-not-at-top,wrong-import-position
from torch_geometric import transforms as T  # pylint: disable=g-import-not-at-top,wrong-import-position
from torch_geometric.datasets import Planetoid  # pylint: disable=g-import-not-at-top,wrong-import-position
from torch_geometric.nn import GCNConv  # pylint: disable=g-import-not-at-top,wrong-import-position

WARMUP_EPOCHS = 5


class GCN(torch.nn.Module):

  def __init__(self, in_channels, hidden, out_channels):
    super().__init__()
    self.conv1 = GCNConv(in_channels, hidden, cached=True)
    self.conv2 = GCNConv(hidden, out_channels, cached=True)

  def forward(self, x, edge_index):
    x = F.dropout(x, p=0.5, training=self.training)
    x = self.conv1(x, edge_index).relu()
    x = F.dropout(x, p=0.5, training=self.training)
    return self.conv2(x, edge_index)


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--data-dir", required=True, help="Folder with ind.cora.* files.")
  parser.add_argument("--work-dir", required=True)
  parser.add_argument("--seed", type=int, default=0)
  parser.add_argument("--epochs", type=int, default=200)
  args = parser.parse_args(argv)
  torch.set_num_threads(os.cpu_count() or 1)
  torch.manual_seed(args.seed)
  raw = os.path.join(args.work_dir, "Cora", "raw")
  os.makedirs(raw, exist_ok=True)
  for name in ("x", "tx", "allx", "y", "ty", "ally", "graph", "test.index"):
    target = os.path.join(raw, f"ind.cora.{name}")
    if not os.path.exists(target):
      shutil.copy(os.path.join(args.data_dir, f"ind.cora.{name}"), target)
  data = Planetoid(args.work_dir, "Cora", transform=T.NormalizeFeatures())[0]

  start = time.time()
  model = GCN(data.num_features, 16, 7)
  optimizer = torch.optim.Adam([
      dict(params=model.conv1.parameters(), weight_decay=5e-4),
      dict(params=model.conv2.parameters(), weight_decay=0)], lr=0.01)
  first_step = None
  epoch_ends = []
  best = (float("inf"), 0.0, 0.0)
  for _ in range(args.epochs):
    model.train()
    optimizer.zero_grad()
    out = model(data.x, data.edge_index)
    loss = F.cross_entropy(out[data.train_mask], data.y[data.train_mask])
    loss.backward()
    optimizer.step()
    if first_step is None:
      first_step = time.time()
    model.eval()
    with torch.no_grad():
      out = model(data.x, data.edge_index)
      val_loss = float(F.cross_entropy(out[data.val_mask], data.y[data.val_mask]))
      pred = out.argmax(dim=-1)
      accs = [float((pred[m] == data.y[m]).float().mean()) for m in (data.val_mask,
                                                                      data.test_mask)]
    if val_loss < best[0]:
      best = (val_loss, *accs)
    epoch_ends.append(time.time())
  end = time.time()
  intervals = [b - a for a, b in zip(epoch_ends, epoch_ends[1:])]
  print(json.dumps({
      "train_s": round(end - start, 3), "first_step_s": round(first_step - start, 3),
      "ms_per_step": round(1000 * statistics.median(intervals[WARMUP_EPOCHS - 1:]), 3),
      "val_accuracy": round(best[1], 4), "test_accuracy": round(best[2], 4),
      "epochs": args.epochs, "process_s": round(time.time() - PROCESS_START, 3),
      "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
      "torch": torch.__version__}), flush=True)
  return 0


if __name__ == "__main__":
  sys.exit(main())
