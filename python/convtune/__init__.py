"""convtune: 2-D convolutions that run the fastest correct algorithm measured on this machine.

Tensors are float32, NCHW: x (N, C, H, W), w (K, C/groups, R, S) (= OIHW), bias (K,),
y (N, K, OH, OW). NumPy arrays and any object with ``__dlpack__`` (CPU PyTorch tensors) are read
in place when C-contiguous and copied once into C order otherwise (channels_last, views).
When x is a torch.Tensor, conv2d and Plan.execute return a torch.Tensor (sharing the output's
memory); torch tensors must be on the CPU, float32 and not require grad (convtune computes no
gradients: use x.detach() or torch.no_grad()). float64 is refused, not converted. Times are in milliseconds, sizes in bytes, speeds in GFLOP/s.

- ``conv2d(x, w, bias=None, stride=1, padding=0, dilation=1, groups=1, *, pads=None,
  threads=0, perfdb=None, find_mode=None, timing="cold", out=None)``: runs
  ``conv::best_forward`` (the perf database's winner; tunes on a miss) and returns a new NumPy
  array. ``padding`` as torch's: an int, (h, w), ``'same'`` (stride 1) or ``'valid'``;
  ``pads=(top, left, bottom, right)`` (ONNX's order) for asymmetric padding.
- ``Problem``: one convolution, from keywords or a oneDNN benchdnn descriptor string.
- ``Plan``: choose once, pack the weights, ``execute`` many times.
- ``tune``, ``explain``: measure every algorithm on a problem; plain dicts and lists back.
- ``import_model(path, inputs=None)``: (path: str, bytes or os.PathLike) the convolutions of an ONNX or Caffe prototxt network.
- ``read_perfdb(path=None)``: every row of a perf database; ``python -m convtune.plot`` draws it.
- ``Error``: raised for every rejected argument value or type (None included; e.g.
  ``budget_s: expected a number, got str '1'``) and every failed call; a subclass of ValueError.
  MemoryError when an output does not fit in memory. A missing argument, an extra positional
  one or an unknown keyword is Python's own TypeError, as for any function.

The perf database is ``$CONVTUNE_PERFDB``, else ``$XDG_CACHE_HOME/convtune/perfdb.sqlite``,
else ``~/.cache/convtune/perfdb.sqlite``.
"""

from ._convtune import (
    Error,
    Plan,
    Problem,
    __version__,
    algorithms,
    conv2d,
    cpu_isa,
    default_perfdb_path,
    explain,
    fingerprint,
    import_model,
    read_batch_file,
    read_perfdb,
    tune,
    verify,
)

Error.__module__ = __name__  # shown as convtune.Error

__all__ = [
    "Error",
    "Plan",
    "Problem",
    "__version__",
    "algorithms",
    "conv2d",
    "cpu_isa",
    "default_perfdb_path",
    "explain",
    "fingerprint",
    "import_model",
    "read_batch_file",
    "read_perfdb",
    "tune",
    "verify",
]
