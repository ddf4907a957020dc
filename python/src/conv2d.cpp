// convtune.conv2d: NCHW float32 convolution through conv::best_forward (the tuned winner).
#include <nanobind/stl/string.h>

#include <new>
#include <optional>
#include <string>

#include "args.hpp"
#include "arrays.hpp"
#include "bindings.hpp"
#include "options.hpp"

namespace convtune_py {

namespace {

const char* kConv2dDoc =
    R"doc(2-D convolution of NCHW float32 tensors with the fastest correct algorithm.

conv2d(x, w, bias=None, stride=1, padding=0, dilation=1, groups=1, *, pads=None, threads=0,
       perfdb=None, find_mode=None, timing="cold", out=None) -> numpy.ndarray | torch.Tensor

x: (N, C, H, W) input; w: (K, C/groups, R, S) weights (OIHW); bias: (K,) or None. Each a
float32 CPU array: a NumPy array or any object with __dlpack__ (e.g. a CPU torch.Tensor), read
in place when C-contiguous; any other layout (a transposed or sliced view, a channels_last
tensor, negative or zero strides) is copied once into C order first, as
numpy.ascontiguousarray / tensor.contiguous() would (pass C-contiguous arrays to avoid the copy).
A torch.Tensor must be on the CPU, torch.float32 and, with grad mode on, not require grad:
convtune computes no gradients, so x.detach() or torch.no_grad() (where it is detached) says the
graph ends here, instead of convtune dropping it silently.
stride, dilation: int or (h, w); dilation 1 = dense. padding: as torch.nn.functional.conv2d,
an int (every side), (h, w), 'valid' (none) or 'same' (stride 1 only: OH = H and OW = W, a
total of dilation * (kernel - 1) per axis, the odd one at the bottom / right as torch puts it).
pads: (top, left, bottom, right), ONNX's order, for asymmetric padding (padding left at 0); a
4-tuple padding= is refused, naming pads=. groups: C and K must be divisible by it.
threads: CPU threads (0 = the OpenMP default: OMP_NUM_THREADS, else one per CPU the process may
run on); part of the perf-database fingerprint. In a process forked after a call with more than
one thread (multiprocessing's default "fork" start method), every call runs on one thread, and
finds and stores its perf-database entries for threads=1: GNU OpenMP hangs starting threads
there. Use the "spawn" or "forkserver" start method for workers that each use several threads.
perfdb: perf database path, str or os.PathLike (default $CONVTUNE_PERFDB, else
$XDG_CACHE_HOME/convtune/perfdb.sqlite, else ~/.cache/convtune/perfdb.sqlite).
find_mode: what to do when the database has no winner for this problem: "tune" (measure
every algorithm now and store the winner; the default, takes about a second or more the first
time per problem), "heuristic" (a cheap rule) or "db_only" (raise).
timing: which measurements choose: "cold" (default; timed with the data evicted from the caches
first, as a layer among others in a network), "warm" (the cores' L1 and L2 swept first: the data
waits in the last-level cache, as in a network that fits there) or "hot" (timed back to back, for
a layer called in a tight loop); part of the fingerprint, so each has its own winners.

Returns a new float32 NumPy array (N, K, OH, OW), OH = (H + top + bottom - ((R-1)*dilation_h+1))
// stride_h + 1, OW likewise; a CPU float32 torch.Tensor sharing that memory (torch.from_dlpack,
no copy) when x is a torch.Tensor; with out= (a writable float32 C-contiguous array of that shape
that shares no memory with x, w or bias) the result is written there and out is returned: a
loop over layers then allocates nothing and takes no page faults per call. Runs
conv::best_forward with the GIL released.

Raises convtune.Error (a ValueError) naming the argument: wrong dtype (float64 is refused, not
converted: use x.astype(numpy.float32) or x.float()), a torch.Tensor on another device than the
CPU ("x: expected a CPU tensor, got a torch.Tensor on device cuda:0 ...") or requiring grad ("x:
requires_grad tensors are not supported: convtune computes no gradients; use x.detach() or
torch.no_grad()"), wrong number of dimensions, a non-contiguous out,
w.shape[1] * groups != C, bias not (K,), bad stride/padding/dilation/groups, or an output size
below 1; None or an empty dimension for x or w; ints beyond 64 bits ("stride: must be in [1,
2^31], got ..."); a keyword of the wrong type ("find_mode: expected a str, got int 3"). Raises
MemoryError "y: cannot allocate <bytes> bytes for the NxKxOHxOW output" when the output does
not fit in memory (and "x: cannot allocate ... for a C-contiguous copy ..." for the copy).)doc";

conv::ConvProblem problem_of(const Tensor& x, const Tensor& w, nb::handle stride,
                             nb::handle padding, nb::handle dilation, nb::handle groups_obj,
                             nb::handle pads) {
  conv::ConvProblem p;
  p.N = x.shape[0], p.C = x.shape[1], p.H = x.shape[2], p.W = x.shape[3];
  p.K = w.shape[0], p.R = w.shape[2], p.S = w.shape[3];
  const char* pad_name = set_geometry(p, stride, padding, dilation, groups_obj, pads);
  const int64_t groups = p.groups;
  if (groups >= 1 && p.C % groups == 0 && w.shape[1] * groups != p.C)
    throw conv::Error(
        "w: expected shape (K, C/groups, R, S) with C/groups = " + std::to_string(p.C / groups) +
        " (x has C = " + std::to_string(p.C) + ", groups = " + std::to_string(groups) + "), got " +
        shape_text(w.shape) + " (channel mismatch)");
  validate_args(p, FieldNames::kTensors, pad_name);
  return p;
}

nb::object conv2d(nb::handle x_obj, nb::handle w_obj, nb::handle bias_obj, nb::handle stride,
                  nb::handle padding, nb::handle dilation, nb::handle groups, nb::handle pads,
                  nb::handle threads_obj, nb::handle perfdb_obj, nb::handle find_mode,
                  nb::handle timing, nb::handle out_obj) {
  const Tensor x = as_tensor(x_obj, "x", 4);
  const Tensor w = as_tensor(w_obj, "w", 4);
  const conv::ConvProblem p = problem_of(x, w, stride, padding, dilation, groups, pads);
  std::optional<Tensor> bias;
  if (!bias_obj.is_none()) {
    bias = as_tensor(bias_obj, "bias", 1);
    check_shape(*bias, "bias", {p.K}, "(K,)");
  }
  const int threads = thread_arg(threads_obj);
  const conv::ForwardOptions options =
      forward_options(threads, optional_path_arg(perfdb_obj, "perfdb"),
                      optional_str_arg(find_mode, "find_mode"), str_arg(timing, "timing"));
  float* y = nullptr;
  nb::object out;
  if (out_obj.is_none()) {
    out = nb::cast(new_array({p.N, p.K, p.OH(), p.OW()}, &y));
    if (is_torch_tensor(x_obj)) out = torch_output(out);  // torch in, torch out
  } else {
    y = output_arg(out_obj, {p.N, p.K, p.OH(), p.OW()}, {&x, &w, bias ? &*bias : nullptr});
    out = nb::borrow(out_obj);
  }
  try {
    nb::gil_scoped_release unlocked;
    conv::best_forward(p, x.data, w.data, bias ? bias->data : nullptr, y, options);
  } catch (const std::bad_alloc&) {
    raise_memory_error("conv2d: out of memory running " + conv::to_descriptor(p) + " (y alone is " +
                       std::to_string(p.y_bytes()) +
                       " bytes; the algorithm's workspace and tuning buffers come on top)");
  }
  return out;
}

}  // namespace

void bind_conv2d(nb::module_& m) {
  // .none(): None reaches the checks above, which name the argument (nanobind would raise a
  // TypeError listing the signature).
  m.def("conv2d", &conv2d, nb::arg("x").none(), nb::arg("w").none(),
        nb::arg("bias").none() = nb::none(), nb::arg("stride").none() = 1,
        nb::arg("padding").none() = 0, nb::arg("dilation").none() = 1, nb::arg("groups").none() = 1,
        nb::kw_only(), nb::arg("pads").none() = nb::none(), nb::arg("threads").none() = 0,
        nb::arg("perfdb").none() = nb::none(), nb::arg("find_mode").none() = nb::none(),
        nb::arg("timing").none() = "cold", nb::arg("out").none() = nb::none(), kConv2dDoc);
}

}  // namespace convtune_py
