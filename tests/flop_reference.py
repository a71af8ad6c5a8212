"""torch.utils.flop_counter's formulas (pytorch f34fa151, /tmp/peers.md section 3),
applied in plain Python to the ops of a raw Kineto trace: the independent
reference of the analytic FLOP tests. Pass by thread: ops on the thread that
holds the ProfilerStep are forward (and optimizer), ops on autograd's own
thread are backward (tracedb uses the evaluate_function spans instead)."""
from math import prod

MM = {"aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm"}
SDPA = {"aten::_scaled_dot_product_flash_attention", "aten::_scaled_dot_product_efficient_attention",
        "aten::_scaled_dot_product_cudnn_attention"}
SDPA_BWD = {n + "_backward" for n in SDPA}


def mm_flop(a, b):
    return a[0] * a[1] * 2 * b[1]


def bmm_flop(a, b):
    return a[0] * a[1] * a[2] * 2 * b[2]


def conv_flop_count(x, w, out, transposed):
    """torch's conv_flop_count: bias ignored, w[1] = Cin/groups."""
    batch = x[0]
    conv_shape = (x if transposed else out)[2:]
    c_out, c_in, *filt = w
    return prod(conv_shape) * prod(filt) * batch * c_out * c_in * 2


def conv_out_shape(x, w, stride, padding, dilation, transposed, output_padding):
    n = len(x) - 2
    pick = lambda l, i: l[i] if len(l) > 1 else l[0]   # noqa: E731
    if transposed:
        sp = [(x[2 + i] - 1) * pick(stride, i) - 2 * pick(padding, i) + pick(dilation, i) * (w[2 + i] - 1)
              + pick(output_padding, i) + 1 for i in range(n)]
        return [x[0], w[1]] + sp
    sp = [(x[2 + i] + 2 * pick(padding, i) - pick(dilation, i) * (w[2 + i] - 1) - 1) // pick(stride, i) + 1
          for i in range(n)]
    return [x[0], w[0]] + sp


def t(s):
    return [s[1], s[0]] + list(s[2:])


def conv_backward_flop(grad_out, x, w, transposed, output_mask, torch_groups_bug=True, groups=1):
    """torch's conv_backward_flop; with torch_groups_bug=False the grad_weight term
    is divided by groups (the correct count, pytorch PR #183405)."""
    flop = 0
    if output_mask[0]:
        flop += conv_flop_count(grad_out, w, x, not transposed)
    if output_mask[1]:
        if transposed:
            gw = conv_flop_count(t(grad_out), t(x), t(w), False)
        else:
            gw = conv_flop_count(t(x), t(grad_out), t(w), False)
        flop += gw if torch_groups_bug else gw // groups
    return flop


def sdpa_flop(q, k, v):
    b, h, s_q, d_q = q
    s_k, d_v = k[2], v[3]
    return bmm_flop([b * h, s_q, d_q], [b * h, d_q, s_k]) + bmm_flop([b * h, s_q, s_k], [b * h, s_k, d_v])


def sdpa_backward_flop(q, k, v):
    b, h, s_q, d_q = q
    s_k, d_v = k[2], v[3]
    total = 0
    total += bmm_flop([b * h, s_q, d_v], [b * h, d_v, s_k])
    total += bmm_flop([b * h, s_k, s_q], [b * h, s_q, d_v])
    total += bmm_flop([b * h, s_q, s_k], [b * h, s_k, d_q])
    total += bmm_flop([b * h, d_q, s_q], [b * h, s_q, s_k])
    total += bmm_flop([b * h, s_q, d_q], [b * h, d_q, s_k])   # recomputed scores
    return total


def _ints(text):
    return [int(v) for v in text.strip("[]").split(",") if v.strip()]


def op_flops(e, torch_groups_bug=True):
    """(flops, is_matrix) of one cpu_op event by torch's registry, or None."""
    name, a = e["name"], e.get("args") or {}
    d, ci = a.get("Input Dims"), a.get("Concrete Inputs")
    if name == "aten::mm":
        return mm_flop(d[0], d[1])
    if name == "aten::addmm":
        return mm_flop(d[1], d[2])
    if name == "aten::bmm":
        return bmm_flop(d[0], d[1])
    if name == "aten::baddbmm":
        return bmm_flop(d[1], d[2])
    if name == "aten::convolution":
        tr = ci[6] == "True"
        out = conv_out_shape(d[0], d[1], _ints(ci[3]), _ints(ci[4]), _ints(ci[5]), tr, _ints(ci[7]))
        return conv_flop_count(d[0], d[1], out, tr)
    if name == "aten::convolution_backward":
        mask = [m.strip() == "True" for m in ci[10].strip("[]").split(",")]
        return conv_backward_flop(d[0], d[1], d[2], ci[7] == "True", mask, torch_groups_bug, int(ci[9]))
    if name in SDPA:
        return sdpa_flop(d[0], d[1], d[2])
    if name in SDPA_BWD:
        return sdpa_backward_flop(d[1], d[2], d[3])
    return None


def training_flops(doc, torch_groups_bug=True):
    """{'forward': n, 'backward': n, 'per_op': {(name, pass): n}} over the ProfilerStep."""
    ev = doc["traceEvents"]
    step = next(e for e in ev if str(e.get("name", "")).startswith("ProfilerStep#") and e.get("cat") != "gpu_user_annotation")
    s0, s1 = float(step["ts"]), float(step["ts"]) + float(step["dur"])
    out = {"forward": 0, "backward": 0, "per_op": {}}
    for e in ev:
        if e.get("ph") != "X" or e.get("cat") != "cpu_op" or not s0 <= float(e["ts"]) <= s1:
            continue
        f = op_flops(e, torch_groups_bug)
        if f is None:
            continue
        p = "forward" if e.get("tid") == step.get("tid") else "backward"
        out[p] += f
        out["per_op"][(e["name"], p)] = out["per_op"].get((e["name"], p), 0) + f
    return out
