// convtune.Problem (conv::ConvProblem) and read_batch_file.
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <cstdio>
#include <functional>
#include <optional>
#include <string>

#include "args.hpp"
#include "bindings.hpp"
#include "conv/problem.hpp"

namespace convtune_py {

namespace {

using conv::ConvProblem;

nb::tuple shape(std::initializer_list<int64_t> dims) {
  nb::list l;
  for (int64_t d : dims) l.append(d);
  return nb::tuple(l);
}

nb::dict to_dict(const ConvProblem& p) {
  nb::dict d;
  d["N"] = p.N, d["C"] = p.C, d["H"] = p.H, d["W"] = p.W, d["K"] = p.K, d["R"] = p.R;
  d["S"] = p.S, d["stride_h"] = p.stride_h, d["stride_w"] = p.stride_w;
  d["pad_top"] = p.pad_top, d["pad_bottom"] = p.pad_bottom, d["pad_left"] = p.pad_left;
  d["pad_right"] = p.pad_right, d["dilation_h"] = p.dilation_h, d["dilation_w"] = p.dilation_w;
  d["groups"] = p.groups, d["name"] = p.name;
  return d;
}

const char* kProblemDoc = R"(One forward convolution y = conv(x, w) + bias (conv::ConvProblem).

Problem(descriptor=None, *, N=1, C=1, H=1, W=1, K=1, R=1, S=1, stride=1, padding=0,
        dilation=1, groups=1, pads=None, name="")

Either parse a oneDNN benchdnn descriptor, e.g.
``Problem('mb1ic3ih227oc96kh11sh4n"alexnet:conv1"')``, or give the fields as keywords:
N batch, C input channels, H x W input size, K output channels, R x S kernel size.
stride and dilation: an int or a pair (h, w) (dilation 1 = dense); padding: as
torch.nn.functional.conv2d, an int, a pair (h, w), 'valid' or 'same' (stride 1 only; the odd
pixel of an even total at the bottom / right, as torch); pads: (top, left, bottom, right), ONNX's
order, for asymmetric padding (a 4-tuple padding= is refused). .padding reads back (h, w),
.pads (top, left, bottom, right).

Tensors (all float32, C order): x (N, C, H, W) NCHW, w (K, C/groups, R, S) KCRS = OIHW,
bias (K,), y (N, K, OH, OW) with OH = (H + pad_top + pad_bottom - ((R-1)*dilation_h + 1)) //
stride_h + 1 (OW likewise).

Raises convtune.Error (a ValueError) naming the keyword, e.g. "stride (h): must be >= 1, got
0", "pads[2] (bottom): must be >= 0, got -1", "N: must be in [1, 2^31], got
1180591620717411303424", "N: expected an int, got str '2'", "H: padded height is smaller than
the dilated kernel height 5, so OH < 1, got 3", or the descriptor's position of a bad token;
validate() and key name the attribute ("stride_h: must be >= 1, got 0"). Equality compares every field but
the name; the hash is that of .key. A value of the wrong type raises convtune.Error too, for a
writable field as for a keyword (p.N = "2"); p == 5 is False.)";

// A layer name: UTF-8 text without control characters.
std::string name_arg(nb::handle v) {
  std::string name = str_arg(v, "name");
  // As the CLI and batch files refuse them: printed, they would end or rewrite a line.
  for (const char c : name)
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
      char hex[8];
      std::snprintf(hex, sizeof hex, "0x%02x", static_cast<unsigned char>(c));
      throw conv::Error(std::string("name: control character ") + hex + " (not allowed in names)");
    }
  return name;
}

// A writable int field, checked as the keyword of the same name is (p.N = "2" raises
// convtune.Error naming N, where def_rw's typed setter would raise TypeError).
void int_field(nb::class_<ConvProblem>& cls, const char* field, int64_t ConvProblem::*member,
               const char* range, const char* doc) {
  cls.def_prop_rw(
      field, [member](const ConvProblem& p) { return p.*member; },
      [member, field, range](ConvProblem& p, nb::handle v) {
        p.*member = int_arg(v, field, range);
      },
      nb::for_setter(nb::arg("value").none()), doc);
}

// The writable int fields, added to `cls`.
nb::class_<ConvProblem> int_fields(nb::class_<ConvProblem> cls) {
  int_field(cls, "N", &ConvProblem::N, kSizeRange, "batch size");
  int_field(cls, "C", &ConvProblem::C, kSizeRange, "input channels");
  int_field(cls, "H", &ConvProblem::H, kSizeRange, "input height");
  int_field(cls, "W", &ConvProblem::W, kSizeRange, "input width");
  int_field(cls, "K", &ConvProblem::K, kSizeRange, "output channels");
  int_field(cls, "R", &ConvProblem::R, kSizeRange, "kernel height");
  int_field(cls, "S", &ConvProblem::S, kSizeRange, "kernel width");
  int_field(cls, "stride_h", &ConvProblem::stride_h, kSizeRange, "vertical stride");
  int_field(cls, "stride_w", &ConvProblem::stride_w, kSizeRange, "horizontal stride");
  int_field(cls, "pad_top", &ConvProblem::pad_top, kPadRange, "rows of zeros above");
  int_field(cls, "pad_bottom", &ConvProblem::pad_bottom, kPadRange, "rows of zeros below");
  int_field(cls, "pad_left", &ConvProblem::pad_left, kPadRange, "columns of zeros on the left");
  int_field(cls, "pad_right", &ConvProblem::pad_right, kPadRange, "columns of zeros on the right");
  int_field(cls, "dilation_h", &ConvProblem::dilation_h, kSizeRange, "1 = dense");
  int_field(cls, "dilation_w", &ConvProblem::dilation_w, kSizeRange, "1 = dense");
  int_field(cls, "groups", &ConvProblem::groups, kSizeRange, "C and K are divisible by it");
  return cls;
}

}  // namespace

void bind_problem(nb::module_& m) {
  int_fields(nb::class_<ConvProblem>(m, "Problem", kProblemDoc))
      .def(
          "__init__",
          [](ConvProblem* self, nb::handle descriptor, nb::handle N, nb::handle C, nb::handle H,
             nb::handle W, nb::handle K, nb::handle R, nb::handle S, nb::handle stride,
             nb::handle padding, nb::handle dilation, nb::handle groups, nb::handle pads,
             nb::handle name) {
            const std::string label = name.is_none() ? std::string() : name_arg(name);
            if (!descriptor.is_none()) {
              if (!nb::isinstance<nb::str>(descriptor))
                throw conv::Error("descriptor: expected a benchdnn descriptor str, got " +
                                  type_text(descriptor));
              const bool fields = !N.is_none() || !C.is_none() || !H.is_none() || !W.is_none() ||
                                  !K.is_none() || !R.is_none() || !S.is_none() ||
                                  !stride.is_none() || !padding.is_none() || !dilation.is_none() ||
                                  !groups.is_none() || !pads.is_none();
              if (fields)
                throw conv::Error(
                    "Problem: pass a descriptor or keyword fields (N, C, ...), not both");
              new (self) ConvProblem(conv::parse_descriptor(str_arg(descriptor, "descriptor")));
              if (!name.is_none()) self->name = label;
              return;
            }
            auto size = [](nb::handle v, const char* field) {
              return v.is_none() ? int64_t{1} : int_arg(v, field, kSizeRange);
            };
            ConvProblem p;
            p.N = size(N, "N"), p.C = size(C, "C"), p.H = size(H, "H"), p.W = size(W, "W");
            p.K = size(K, "K"), p.R = size(R, "R"), p.S = size(S, "S");
            nb::int_ one(1), zero(0);
            const char* pad_name = set_geometry(p, stride.is_none() ? nb::handle(one) : stride,
                                                padding.is_none() ? nb::handle(zero) : padding,
                                                dilation.is_none() ? nb::handle(one) : dilation,
                                                groups.is_none() ? nb::handle(one) : groups, pads);
            p.name = label;
            validate_args(p, FieldNames::kKeywords, pad_name);
            new (self) ConvProblem(std::move(p));
          },
          nb::arg("descriptor").none() = nb::none(), nb::kw_only(),
          nb::arg("N").none() = nb::none(), nb::arg("C").none() = nb::none(),
          nb::arg("H").none() = nb::none(), nb::arg("W").none() = nb::none(),
          nb::arg("K").none() = nb::none(), nb::arg("R").none() = nb::none(),
          nb::arg("S").none() = nb::none(), nb::arg("stride").none() = nb::none(),
          nb::arg("padding").none() = nb::none(), nb::arg("dilation").none() = nb::none(),
          nb::arg("groups").none() = nb::none(), nb::arg("pads").none() = nb::none(),
          nb::arg("name").none() = nb::none())
      .def_static(
          "from_descriptor",
          [](nb::handle text) { return conv::parse_descriptor(str_arg(text, "text")); },
          nb::arg("text").none(),
          "Parses a benchdnn descriptor (same as Problem(text)). Raises convtune.Error, for a "
          "text that is not a str too.")
      .def_prop_rw(
          "name", [](const ConvProblem& p) { return p.name; },
          [](ConvProblem& p, nb::handle v) { p.name = name_arg(v); },
          nb::for_setter(nb::arg("value").none()),
          "layer name (not part of the key); a str without control characters")
      .def_prop_ro("stride",
                   [](const ConvProblem& p) {
                     return shape({p.stride_h, p.stride_w});
                   })
      .def_prop_ro(
          "padding",
          [](const ConvProblem& p) -> nb::object {
            // A pair as torch's Conv2d.padding; asymmetric padding has none, and guessing one
            // (or a 4-tuple in some order) would pass silently where it is read.
            if (p.pad_top != p.pad_bottom || p.pad_left != p.pad_right) {
              set_error(PyExc_AttributeError,
                        "padding: asymmetric padding has no (h, w) form; read .pads = (top, left, "
                        "bottom, right) = (" +
                            std::to_string(p.pad_top) + ", " + std::to_string(p.pad_left) + ", " +
                            std::to_string(p.pad_bottom) + ", " + std::to_string(p.pad_right) +
                            ")");
              throw nb::python_error();
            }
            return shape({p.pad_top, p.pad_left});
          },
          "(h, w) as torch's Conv2d.padding; AttributeError for asymmetric padding (read .pads)")
      .def_prop_ro(
          "pads",
          [](const ConvProblem& p) {
            return shape({p.pad_top, p.pad_left, p.pad_bottom, p.pad_right});
          },
          "(top, left, bottom, right), ONNX's order; as the pads= keyword takes it")
      .def_prop_ro("dilation",
                   [](const ConvProblem& p) {
                     return shape({p.dilation_h, p.dilation_w});
                   })
      .def_prop_ro("OH", &ConvProblem::OH, "output height")
      .def_prop_ro("OW", &ConvProblem::OW, "output width")
      .def_prop_ro("x_shape",
                   [](const ConvProblem& p) {
                     return shape({p.N, p.C, p.H, p.W});
                   })
      .def_prop_ro("w_shape",
                   [](const ConvProblem& p) {
                     return shape({p.K, p.Cg(), p.R, p.S});
                   })
      .def_prop_ro("y_shape",
                   [](const ConvProblem& p) {
                     return shape({p.N, p.K, p.OH(), p.OW()});
                   })
      .def_prop_ro("flops", &ConvProblem::flops,
                   "direct-convolution FLOPs, 2*N*K*(C/groups)*R*S*OH*OW (bias not counted)")
      .def_prop_ro("descriptor", &conv::to_descriptor,
                   "benchdnn descriptor text, name included (parses back to an equal Problem)")
      .def_prop_ro("key", &ConvProblem::key,
                   "the perf-database key: every field explicit, no name. Raises convtune.Error "
                   "for an invalid problem")
      .def("validate", &ConvProblem::validate,
           "Raises convtune.Error naming the first bad field (fields are writable).")
      .def("to_dict", &to_dict, "The fields as a dict.")
      // is_operator: another type gives NotImplemented (so p == 5 is False and p in [None]
      // works), not a TypeError.
      .def(
          "__eq__", [](const ConvProblem& a, const ConvProblem& b) { return a == b; },
          nb::is_operator())
      .def("__hash__", [](const ConvProblem& p) { return std::hash<std::string>()(p.key()); })
      .def("__repr__",
           [](const ConvProblem& p) {
             return "convtune.Problem(" +
                    nb::cast<std::string>(nb::repr(nb::str(conv::to_descriptor(p).c_str()))) + ")";
           })
      .def("__copy__", [](const ConvProblem& p) { return p; })
      .def("__getstate__", [](const ConvProblem& p) { return conv::to_descriptor(p); })
      .def("__setstate__", [](ConvProblem& p, nb::handle state) {
        new (&p) ConvProblem(conv::parse_descriptor(str_arg(state, "state")));
      });

  m.def(
      "read_batch_file",
      [](nb::handle path) { return conv::read_batch_file(path_arg(path, "path")); },
      nb::arg("path").none(),
      "The problems of a benchdnn batch file (one or more descriptors per line, # comments, "
      "--mb=N, --batch=FILE), in file order: list of Problem. Raises convtune.Error "
      "'<path>:<line>: ...'.");
}

}  // namespace convtune_py
