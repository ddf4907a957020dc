#!/usr/bin/env python3
"""Writes the Caffe deploy.prototxt fixtures of tests/models from the published architectures.

    python3 tests/models/make_prototxt.py   # rewrites alexnet, vgg16, resnet50, mobilenet_v2

- alexnet: Krizhevsky et al. 2012 as in Caffe's bvlc_alexnet deploy (227 input; conv2, conv4,
  conv5 in 2 groups; LRN after conv1/conv2).
- vgg16: Simonyan & Zisserman 2014, configuration D (13 3x3 convs, 5 max pools, 3 fc).
- resnet50: He et al. 2015, ResNet-50 v1.5 (stride 2 on the 3x3 of the first bottleneck of
  stages 3-5), BatchNorm + Scale after every convolution, Caffe-style layer names.
- mobilenet_v2: Sandler et al. 2018, width 1.0, 224 input; no expansion layer when t = 1; ReLU
  stands in for ReLU6; depthwise convolutions are Convolution layers with group = channels.

All at batch 1. Each network uses another way to declare its input (Input layer, input_dim,
input_shape) so that the fixtures cover them all.
"""

import os


class Net:
    """Collects layers as prototxt text."""

    def __init__(self, name):
        self.lines = [f'name: "{name}"']

    def input_layer(self, top, dims):
        shape = " ".join(f"dim: {d}" for d in dims)
        self.layer(top, "Input", [], [top], f"input_param {{ shape {{ {shape} }} }}")

    def input_dim(self, top, dims):
        self.lines.append(f'input: "{top}"')
        self.lines += [f"input_dim: {d}" for d in dims]

    def input_shape(self, top, dims):
        self.lines.append(f'input: "{top}"')
        self.lines.append("input_shape { " + " ".join(f"dim: {d}" for d in dims) + " }")

    def layer(self, name, type_, bottoms, tops, *params):
        out = ["layer {", f'  name: "{name}"', f'  type: "{type_}"']
        out += [f'  bottom: "{b}"' for b in bottoms]
        out += [f'  top: "{t}"' for t in tops]
        out += [f"  {p}" for p in params]
        out.append("}")
        self.lines += out

    def conv(self, name, bottom, top, num_output, kernel, stride=1, pad=0, group=1, bias=True,
             engine=None):
        fields = [f"num_output: {num_output}"]
        if not bias:
            fields.append("bias_term: false")
        if pad:
            fields.append(f"pad: {pad}")
        fields.append(f"kernel_size: {kernel}")
        if stride != 1:
            fields.append(f"stride: {stride}")
        if group != 1:
            fields.append(f"group: {group}")
        if engine:
            fields.append(f"engine: {engine}")
        params = ["param { lr_mult: 1 decay_mult: 1 }"]
        if bias:
            params.append("param { lr_mult: 2 decay_mult: 0 }")
        fields.append('weight_filler { type: "msra" }')
        self.layer(name, "Convolution", [bottom], [top], *params,
                   "convolution_param { " + " ".join(fields) + " }")

    def relu(self, name, blob):
        self.layer(name, "ReLU", [blob], [blob])

    def bn_scale(self, bn_name, scale_name, blob):
        """BatchNorm (statistics frozen) and Scale with bias, both in place."""
        self.layer(bn_name, "BatchNorm", [blob], [blob],
                   "batch_norm_param { use_global_stats: true }")
        self.layer(scale_name, "Scale", [blob], [blob], "scale_param { bias_term: true }")

    def pool(self, name, bottom, top, method, kernel=None, stride=1, pad=0, global_=False):
        fields = [f"pool: {method}"]
        if global_:
            fields.append("global_pooling: true")
        else:
            fields.append(f"kernel_size: {kernel}")
            if stride != 1:
                fields.append(f"stride: {stride}")
            if pad:
                fields.append(f"pad: {pad}")
        self.layer(name, "Pooling", [bottom], [top], "pooling_param { " + " ".join(fields) + " }")

    def fc(self, name, bottom, top, num_output):
        self.layer(name, "InnerProduct", [bottom], [top],
                   f"inner_product_param {{ num_output: {num_output} }}")

    def text(self):
        return "\n".join(self.lines) + "\n"


def alexnet():
    n = Net("AlexNet")
    n.input_layer("data", [1, 3, 227, 227])
    n.conv("conv1", "data", "conv1", 96, 11, stride=4)
    n.relu("relu1", "conv1")
    lrn = "lrn_param { local_size: 5 alpha: 0.0001 beta: 0.75 }"
    n.layer("norm1", "LRN", ["conv1"], ["norm1"], lrn)
    n.pool("pool1", "norm1", "pool1", "MAX", 3, 2)
    n.conv("conv2", "pool1", "conv2", 256, 5, pad=2, group=2)
    n.relu("relu2", "conv2")
    n.layer("norm2", "LRN", ["conv2"], ["norm2"], lrn)
    n.pool("pool2", "norm2", "pool2", "MAX", 3, 2)
    n.conv("conv3", "pool2", "conv3", 384, 3, pad=1)
    n.relu("relu3", "conv3")
    n.conv("conv4", "conv3", "conv4", 384, 3, pad=1, group=2)
    n.relu("relu4", "conv4")
    n.conv("conv5", "conv4", "conv5", 256, 3, pad=1, group=2)
    n.relu("relu5", "conv5")
    n.pool("pool5", "conv5", "pool5", "MAX", 3, 2)
    prev = "pool5"
    for i, width in ((6, 4096), (7, 4096)):
        n.fc(f"fc{i}", prev, f"fc{i}", width)
        n.relu(f"relu{i}", f"fc{i}")
        n.layer(f"drop{i}", "Dropout", [f"fc{i}"], [f"fc{i}"],
                "dropout_param { dropout_ratio: 0.5 }")
        prev = f"fc{i}"
    n.fc("fc8", prev, "fc8", 1000)
    n.layer("prob", "Softmax", ["fc8"], ["prob"])
    return n


def vgg16():
    n = Net("VGG_ILSVRC_16_layers")
    n.input_dim("data", [1, 3, 224, 224])
    prev = "data"
    for stage, (convs, width) in enumerate(((2, 64), (2, 128), (3, 256), (3, 512), (3, 512)), 1):
        for i in range(1, convs + 1):
            name = f"conv{stage}_{i}"
            n.conv(name, prev, name, width, 3, pad=1)
            n.relu(f"relu{stage}_{i}", name)
            prev = name
        n.pool(f"pool{stage}", prev, f"pool{stage}", "MAX", 2, 2)
        prev = f"pool{stage}"
    for i, width in ((6, 4096), (7, 4096)):
        n.fc(f"fc{i}", prev, f"fc{i}", width)
        n.relu(f"relu{i}", f"fc{i}")
        n.layer(f"drop{i}", "Dropout", [f"fc{i}"], [f"fc{i}"])
        prev = f"fc{i}"
    n.fc("fc8", prev, "fc8", 1000)
    n.layer("prob", "Softmax", ["fc8"], ["prob"])
    return n


def resnet50():
    n = Net("ResNet-50")
    n.input_shape("data", [1, 3, 224, 224])
    n.conv("conv1", "data", "conv1", 64, 7, stride=2, pad=3, bias=False)
    n.bn_scale("bn_conv1", "scale_conv1", "conv1")
    n.relu("conv1_relu", "conv1")
    # 112 -> 56 only with Caffe's ceil rounding: ceil((112 - 3) / 2) + 1.
    n.pool("pool1", "conv1", "pool1", "MAX", 3, 2)
    prev = "pool1"
    stages = ((2, 3, 64), (3, 4, 128), (4, 6, 256), (5, 3, 512))
    for stage, blocks, width in stages:
        for b in range(blocks):
            tag = f"{stage}{chr(ord('a') + b)}"
            first = b == 0
            stride = 2 if first and stage > 2 else 1
            shortcut = prev
            if first:  # projection shortcut
                shortcut = f"res{tag}_branch1"
                n.conv(shortcut, prev, shortcut, 4 * width, 1, stride=stride, bias=False)
                n.bn_scale(f"bn{tag}_branch1", f"scale{tag}_branch1", shortcut)
            x = prev
            for part, (k, w, s, p) in zip("abc", ((1, width, 1, 0), (3, width, stride, 1),
                                                  (1, 4 * width, 1, 0))):
                name = f"res{tag}_branch2{part}"
                n.conv(name, x, name, w, k, stride=s, pad=p, bias=False)
                n.bn_scale(f"bn{tag}_branch2{part}", f"scale{tag}_branch2{part}", name)
                if part != "c":
                    n.relu(f"res{tag}_branch2{part}_relu", name)
                x = name
            n.layer(f"res{tag}", "Eltwise", [shortcut, x], [f"res{tag}"],
                    "eltwise_param { operation: SUM }")
            n.relu(f"res{tag}_relu", f"res{tag}")
            prev = f"res{tag}"
    n.pool("pool5", prev, "pool5", "AVE", global_=True)
    n.fc("fc1000", "pool5", "fc1000", 1000)
    n.layer("prob", "Softmax", ["fc1000"], ["prob"])
    return n


# (t, c, n, s): expansion, output channels, repeats, stride of the first repeat.
MOBILENET_V2_BLOCKS = ((1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2),
                       (6, 96, 3, 1), (6, 160, 3, 2), (6, 320, 1, 1))
# The usual Caffe names of the 17 bottlenecks (grouped as in the common Caffe port).
MOBILENET_V2_NAMES = ("conv2_1", "conv2_2", "conv3_1", "conv3_2", "conv4_1", "conv4_2",
                      "conv4_3", "conv4_4", "conv4_5", "conv4_6", "conv4_7", "conv5_1",
                      "conv5_2", "conv5_3", "conv6_1", "conv6_2", "conv6_3")


def mobilenet_v2():
    n = Net("MobileNetV2")
    n.input_layer("data", [1, 3, 224, 224])
    n.conv("conv1", "data", "conv1", 32, 3, stride=2, pad=1, bias=False)
    n.bn_scale("conv1/bn", "conv1/scale", "conv1")
    n.relu("relu1", "conv1")
    prev, channels = "conv1", 32
    names = iter(MOBILENET_V2_NAMES)
    for t, c, repeats, s in MOBILENET_V2_BLOCKS:
        for r in range(repeats):
            name = next(names)
            suffix = name[len("conv"):]
            stride = s if r == 0 else 1
            hidden = channels * t
            x = prev
            if t != 1:
                n.conv(f"{name}/expand", x, f"{name}/expand", hidden, 1, bias=False)
                n.bn_scale(f"{name}/expand/bn", f"{name}/expand/scale", f"{name}/expand")
                n.relu(f"relu{suffix}/expand", f"{name}/expand")
                x = f"{name}/expand"
            n.conv(f"{name}/dwise", x, f"{name}/dwise", hidden, 3, stride=stride, pad=1,
                   group=hidden, bias=False, engine="CAFFE")
            n.bn_scale(f"{name}/dwise/bn", f"{name}/dwise/scale", f"{name}/dwise")
            n.relu(f"relu{suffix}/dwise", f"{name}/dwise")
            n.conv(f"{name}/linear", f"{name}/dwise", f"{name}/linear", c, 1, bias=False)
            n.bn_scale(f"{name}/linear/bn", f"{name}/linear/scale", f"{name}/linear")
            out = f"{name}/linear"
            if stride == 1 and channels == c:
                out = f"block_{suffix}"
                n.layer(out, "Eltwise", [prev, f"{name}/linear"], [out])
            prev, channels = out, c
    n.conv("conv6_4", prev, "conv6_4", 1280, 1, bias=False)
    n.bn_scale("conv6_4/bn", "conv6_4/scale", "conv6_4")
    n.relu("relu6_4", "conv6_4")
    n.pool("pool6", "conv6_4", "pool6", "AVE", global_=True)
    n.fc("fc7", "pool6", "fc7", 1000)
    n.layer("prob", "Softmax", ["fc7"], ["prob"])
    return n


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    for name, build in (("alexnet", alexnet), ("vgg16", vgg16), ("resnet50", resnet50),
                        ("mobilenet_v2", mobilenet_v2)):
        header = f"# {name}: generated by make_prototxt.py (edit that, not this file).\n"
        with open(os.path.join(here, f"{name}.prototxt"), "w") as f:
            f.write(header + build().text())


if __name__ == "__main__":
    main()
