# The scaled and block formats of libgradprec (kernels/arith/gp_scaled.h, through
# gradprec.formats / gradprec_quantize) bit for bit against independent implementations
# on the CPU (issue 25 item 3): ml_dtypes' element casts, torchao's MXTensor.to_mx(...)
# .dequantize() under each of its scale rules, NVFP4Tensor.to_nvfp4(...).dequantize()
# (one and two levels), torchao.float8's amax_to_scale / to_fp8_saturated and its
# blockwise 1x128 and 128x128 references. Each test compares at least 10^6 values and
# prints how many (pytest -s shows them). The inputs: blocks of 16 of seven kinds (below)
# that reach both ends of E8M0 and of e4m3 scales, all-zero blocks, one huge element
# among tiny ones, NaN and inf inside a block, fp32 subnormals, exact ties of the
# element grids. Where torchao departs from the OCP MX spec, gradprec models both
# (":torchao" and the spec's default) and a test shows where they differ.
import numpy as np
import pytest

torch = pytest.importorskip("torch")
ml_dtypes = pytest.importorskip("ml_dtypes")
mx = pytest.importorskip("torchao.prototype.mx_formats.mx_tensor")
nv = pytest.importorskip("torchao.prototype.mx_formats.nvfp4_tensor")
f8u = pytest.importorskip("torchao.float8.float8_utils")
bw = pytest.importorskip("torchao.prototype.blockwise_fp8_training.kernels")

from gradprec import formats  # noqa: E402

ROWS, COLS = 8192, 128  # 2^20 values; COLS a multiple of 32, 16 and 128, ROWS of 128
ELEMS = {  # gradprec element name: (torch/torchao element dtype, ml_dtypes type)
    "e4m3": (torch.float8_e4m3fn, ml_dtypes.float8_e4m3fn),
    "e5m2": (torch.float8_e5m2, ml_dtypes.float8_e5m2),
    "e2m3": ("fp6_e2m3", ml_dtypes.float6_e2m3fn),
    "e3m2": ("fp6_e3m2", ml_dtypes.float6_e3m2fn),
    "e2m1": (torch.float4_e2m1fn_x2, ml_dtypes.float4_e2m1fn),
}
MX_NAME = {"e4m3": "mxfp8_e4m3", "e5m2": "mxfp8_e5m2", "e2m3": "mxfp6_e2m3", "e3m2": "mxfp6_e3m2", "e2m1": "mxfp4"}
PLAIN_NAME = {"e4m3": "fp8_e4m3", "e5m2": "fp8_e5m2", "e2m3": "fp6_e2m3", "e3m2": "fp6_e3m2", "e2m1": "fp4_e2m1"}


def make_data(seed, specials=True):
    """ROWS x COLS fp32, in groups of 16 (so every MX block of 32 and NVFP4 block of 16
    is one or two groups) of kinds: 0 normal values times 2^U[-140, 126] (both ends of
    E8M0, fp32 subnormals); 1 all zero; 2 one huge element (2^U[0, 100]) among tiny ones
    (2^U[-140, -20]); 3 random fp32 bit patterns (finite); 4 small integers times a
    power of two (exact ties of every element grid); 5 an amax of max_e * 2^k * (1 + j
    2^-23), |j| <= 8, max_e the largest value of an element format (scales a few ulps from
    a power of two); 6 a NaN inside; 7 an inf inside. specials=False leaves out kinds 6
    and 7 (per-tensor scales: one NaN is the tensor's)."""
    rng = np.random.default_rng(seed)
    g = ROWS * COLS // 16
    kinds = rng.integers(0, 8 if specials else 6, size=g)
    x = np.empty((g, 16), dtype=np.float64)
    e = rng.integers(-140, 127, size=(g, 1))
    x[:] = rng.standard_normal((g, 16)) * np.exp2(e)
    x[kinds == 1] = 0.0
    k2 = kinds == 2
    x[k2] = rng.choice([-1, 1], size=(k2.sum(), 16)) * np.exp2(rng.uniform(-140, -20, size=(k2.sum(), 16)))
    x[k2, rng.integers(0, 16)] = np.exp2(rng.uniform(0, 100, size=k2.sum()))
    k4 = kinds == 4
    x[k4] = rng.integers(-64, 65, size=(k4.sum(), 16)) * np.exp2(rng.integers(-130, 100, size=(k4.sum(), 1)))
    k5 = kinds == 5
    n5 = int(k5.sum())
    x[k5] = rng.uniform(-1, 1, size=(n5, 16)) * np.exp2(rng.integers(-100, 100, size=(n5, 1)))
    amax5 = (rng.choice([448.0, 57344.0, 7.5, 28.0, 6.0], size=n5) * np.exp2(rng.integers(-100, 100, size=n5))
             * (1 + rng.integers(-8, 9, size=n5) * 2.0**-23))
    x[k5] = np.minimum(np.abs(x[k5]), amax5[:, None] / 2) * np.sign(x[k5])
    # and e4m3 ties (m + 1/2) 2^E, 8 <= m <= 15, times amax5 / 448 (1 + i 2^-24), |i| <= 4:
    # x * s lands within an fp32 ulp of a tie, where rounding x * s to fp32 first (as
    # torchao and TE do) decides differently from rounding the exact product
    ties = ((rng.integers(8, 16, size=(n5, 16)) + 0.5) * np.exp2(rng.integers(-9, 6, size=(n5, 16)))
            * (amax5[:, None] / 448.0) * (1 + rng.integers(-4, 5, size=(n5, 16)) * 2.0**-24))
    half = rng.random((n5, 16)) < 0.5
    x[k5] = np.where(half, ties * rng.choice([-1, 1], size=(n5, 16)), x[k5])
    x[k5, rng.integers(0, 16)] = amax5
    out = np.clip(x, -3.4e38, 3.4e38).astype(np.float32)
    k3 = kinds == 3
    bits = rng.integers(0, 0xFF800000, size=(k3.sum(), 16), dtype=np.uint64).astype(np.uint32)
    bits[(bits & 0x7F800000) == 0x7F800000] &= 0x807FFFFF  # keep them finite
    out[k3] = bits.view(np.float32)
    out[kinds == 6, rng.integers(0, 16)] = np.nan
    out[kinds == 7, rng.integers(0, 16)] = -np.inf
    return out.reshape(ROWS, COLS)


@pytest.fixture(scope="module")
def data():
    return make_data(20261128)


@pytest.fixture(scope="module")
def finite():
    return make_data(20261129, specials=False)


def same_bits(a, b):
    """Element-wise: equal fp32 bits, or both NaN."""
    a = np.asarray(a, dtype=np.float32).ravel()
    b = np.asarray(b, dtype=np.float32).ravel()
    return (a.view(np.uint32) == b.view(np.uint32)) | (np.isnan(a) & np.isnan(b))


def report(what, n, how="bit for bit"):
    print("%s: %d values compared %s" % (what, n, how))


# ---- element casts against ml_dtypes ----

@pytest.mark.parametrize("elem", list(ELEMS))
def test_element_casts_match_ml_dtypes(elem, data):
    # "<plain>:delayed" with scale 1 is gradprec's cast of x itself (fp32(x * 1) = x):
    # saturating (clamp to +-max first, as torchao and TE do) and, for fp8, the OCP
    # non-saturating cast (":nosat": e4m3 overflows to NaN, e5m2 to inf) that ml_dtypes
    # implements. ml_dtypes' fp6/fp4 saturate by themselves. NaN inputs are left out of
    # fp6/fp4 (neither format has a NaN: ml_dtypes writes -0, gradprec a signed zero).
    x = data.ravel()
    mdt = ELEMS[elem][1]
    big = float(ml_dtypes.finfo(mdt).max)
    keep = ~np.isnan(x) if elem in ("e2m3", "e3m2", "e2m1") else np.ones(x.size, bool)
    y, codes, _, _ = formats.quantize(x, PLAIN_NAME[elem] + ":delayed", scale_in=1.0)
    want = np.clip(x, -big, big).astype(mdt).astype(np.float32)
    ok = same_bits(y, want)[keep]
    assert ok.all(), "first mismatch at %d" % np.flatnonzero(~same_bits(y, want) & keep)[0]
    n = int(keep.sum())
    if elem in ("e4m3", "e5m2"):
        yn, _, _, _ = formats.quantize(x, PLAIN_NAME[elem] + ":delayed:nosat", scale_in=1.0)
        assert same_bits(yn, x.astype(mdt).astype(np.float32)).all()
        assert np.isnan(yn).sum() > np.isnan(x).sum() or elem == "e5m2"  # overflow reached
        n += x.size
    report("ml_dtypes %s" % elem, n)


# ---- OCP MX against torchao's MXTensor ----

def torchao_mx(x, elem, mode):
    t = mx.MXTensor.to_mx(torch.from_numpy(x), ELEMS[elem][0], 32, scaling_mode=mode)
    return t.dequantize(torch.float32).numpy(), t.scale.view(torch.uint8).numpy().ravel()


def e8m0_codes(scales):
    s = scales.astype(np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        c = np.where(np.isnan(s), 255, np.round(np.log2(np.where(s > 0, s, 1.0))) + 127)
    return c.astype(np.int64)


RULES = {"floor": mx.ScaleCalculationMode.FLOOR, "ceil": mx.ScaleCalculationMode.CEIL,
         "even": mx.ScaleCalculationMode.EVEN, "rceil": mx.ScaleCalculationMode.RCEIL}


@pytest.mark.parametrize("rule", list(RULES))
@pytest.mark.parametrize("elem", list(ELEMS))
def test_mx_matches_torchao(elem, rule, data):
    # ":torchao" models torchao's to_mx, scale codes and dequantized values bit for bit.
    # One departure is not modelled but bounded: RCEIL's eager fallback takes
    # ceil(torch.log2(d)) in fp32, and for d a few ulps above a power of two 2^k the fp32
    # log2 rounds down to k (the exact ceil, cvt.rp.ue8m0 on Blackwell, is k + 1):
    # such blocks get torchao's scale one lower; they are counted and checked to be
    # exactly those with d in (2^k, 2^k (1 + 2^-16)).
    y, _, scales, _ = formats.quantize(data, MX_NAME[elem] + ":" + rule + ":torchao")
    ty, tscale = torchao_mx(data, elem, RULES[rule])
    codes = e8m0_codes(scales)
    blocks_ok = codes == tscale.astype(np.int64)
    if rule == "rceil":
        amax = np.abs(data.reshape(-1, 32)).max(axis=1)
        d = (amax / np.float32(ml_dtypes.finfo(ELEMS[elem][1]).max)).astype(np.float32)
        m = d.view(np.uint32) & 0x7FFFFF
        near = (m > 0) & (m < (1 << 7)) & (d.view(np.uint32) >= 0x800000)
        assert ((codes - 1 == tscale) | blocks_ok)[near].all()
        assert blocks_ok[~near].all()
        print("rceil: %d of %d blocks where torch.log2 rounds to the power below" % ((~blocks_ok).sum(), codes.size))
    else:
        assert blocks_ok.all(), "first scale mismatch at block %d" % np.flatnonzero(~blocks_ok)[0]
    vals_ok = same_bits(y, ty).reshape(-1, 32)
    assert vals_ok[blocks_ok].all(), "first value mismatch in block %d" % np.flatnonzero(~vals_ok.all(1) & blocks_ok)[0]
    report("torchao to_mx %s %s" % (elem, rule), int(blocks_ok.sum()) * 32 + codes.size)


@pytest.mark.parametrize("rule", ["floor", "rceil"])
def test_mx_spec_and_torchao_differ_only_at_the_bottom_of_e8m0(rule, data):
    # The OCP MX spec (gradprec's default) quantizes with X itself; torchao with
    # max(X, 2^-126) (floor/ceil/even) or by 1 instead of 2^127 (rceil) when the scale
    # code is 0. Same scales, and the values differ only in blocks of scale code 0 that
    # hold non-zero values: some do in this data.
    elem = "e4m3"
    y_spec, _, s_spec, _ = formats.quantize(data, MX_NAME[elem] + ":" + rule)
    y_tao, _, s_tao, _ = formats.quantize(data, MX_NAME[elem] + ":" + rule + ":torchao")
    assert same_bits(s_spec, s_tao).all()
    diff = ~same_bits(y_spec, y_tao).reshape(-1, 32).all(axis=1)
    bottom = e8m0_codes(s_spec) == 0
    assert not diff[~bottom].any()
    assert diff.sum() > 0
    # the spec's values in those blocks: the element grid times 2^-127, by hand: x / 2^-127
    # rounded to e4m3 with saturation, times 2^-127
    xb = data.reshape(-1, 32)[diff].astype(np.float64)
    want = (np.clip(xb * 2.0**127, -448, 448).astype(ml_dtypes.float8_e4m3fn).astype(np.float64) * 2.0**-127)
    assert same_bits(y_spec.reshape(-1, 32)[diff], want.astype(np.float32)).all()
    report("spec vs torchao %s, %d bottom blocks" % (rule, diff.sum()), int(diff.sum()) * 32)


# ---- NVFP4 against torchao's NVFP4Tensor ----

@pytest.mark.parametrize("two_level", [False, True])
def test_nvfp4_matches_torchao(two_level, data, finite):
    # two levels: 512 tensors of 16 x 128 (each its own amax, so 512 tensor scales; a NaN
    # or inf would set the tensor scale of all its blocks, so the finite data)
    x = finite if two_level else data
    parts = np.split(x, 512) if two_level else [x]
    n = 0
    for xp in parts:
        pts = None
        if two_level:
            pts = nv.per_tensor_amax_to_scale(torch.from_numpy(xp).abs().max())
        t = nv.NVFP4Tensor.to_nvfp4(torch.from_numpy(xp), per_tensor_scale=pts)
        ty = t.dequantize(torch.float32).numpy()
        tscale = t.scale.view(torch.uint8).numpy().ravel()
        y, _, scales, ts = formats.quantize(xp, "nvfp4" if two_level else "nvfp4:single")
        if two_level:
            assert np.float32(ts).view(np.uint32) == pts.numpy().view(np.uint32)
        want_scales = tscale.view(ml_dtypes.float8_e4m3fn).astype(np.float32)
        assert same_bits(scales, want_scales).all()
        ok = same_bits(y, ty)
        assert ok.all(), "first mismatch at %d" % np.flatnonzero(~ok)[0]
        n += xp.size + scales.size
    report("torchao NVFP4 %s" % ("two-level" if two_level else "single"), n)


def test_nvfp4_stochastic_rounding_is_unbiased():
    # Stochastic rounding of the e2m1 elements: each result is one of the two grid
    # neighbours lo, hi of the scaled value v = |x| / step (step: the block's e4m3 scale
    # times the tensor scale; v beyond 6 saturates to 6), and over N = 4096 seeds the
    # mean of the dequantized values is min(v, 6) * step: per element the draws are
    # Bernoulli with step h = (hi - lo) * step, so the mean's standard deviation is at most
    # h / (2 sqrt(N)); 6 of them bound it (a false alarm below 1e-8 per element, 256
    # elements). gradprec scales by fp32 operations (x * fp32(fp32(1/ts) / s), the
    # dequantization by fp32(ts * s)), 3 roundings of at most 2^-24 each: v * step is x
    # within |x| 2^-22, added to the bound.
    rng = np.random.default_rng(5)
    x = (rng.standard_normal((1, 256)) * 0.01).astype(np.float32)
    acc = np.zeros(x.size)
    n = 4096
    seen = []
    for s in range(n):
        y, _, _, _ = formats.quantize(x, "nvfp4:sr", seed=s)
        acc += y.ravel()
        if s < 8:
            seen.append(y.ravel())
    mean = acc / n
    grid = np.array([0, 0.5, 1, 1.5, 2, 3, 4, 6])
    _, _, sc, ts = formats.quantize(x, "nvfp4")
    step = np.repeat(sc.astype(np.float64), 16) * ts
    xa = np.abs(x.ravel()).astype(np.float64)
    v = np.minimum(xa / step, 6.0)
    hi = grid[np.searchsorted(grid, v)]
    lo = grid[np.searchsorted(grid, v, side="right") - 1]
    h = (hi - lo) * step
    target = np.sign(x.ravel()) * v * step
    assert (np.abs(mean - target) <= 6 * h / (2 * np.sqrt(n)) + xa * 2.0**-22).all()
    assert (v >= 6).sum() >= 1  # a block's largest element saturates: its mean is 6 * step, not |x|
    for y in seen:  # every draw is a neighbour
        a = np.abs(y) / step
        assert (np.isclose(a, lo, rtol=2.0**-20, atol=0) | np.isclose(a, hi, rtol=2.0**-20, atol=0)).all()
    assert not same_bits(seen[0], seen[1]).all()
    assert same_bits(formats.quantize(x, "nvfp4:sr", seed=3)[0], formats.quantize(x, "nvfp4:sr", seed=3)[0]).all()
    report("NVFP4 stochastic rounding", n * x.size, "statistically (each draw a neighbour, the mean within its bound)")


# ---- fp8 with fp32 scales against torchao.float8 ----

@pytest.mark.parametrize("pow2", [False, True])
@pytest.mark.parametrize("elem", ["e4m3", "e5m2"])
def test_fp8_scales_match_torchao_amax_to_scale(elem, pow2, finite):
    # gradprec's blockwise 1x128 scales are amax_to_scale of each block's amax: 8192
    # blocks here, and 2^20 amaxes directly (one block each, one element: its amax).
    # pow2: torchao computes exp2(floor(log2(s))) in fp32; for s a few ulps below a
    # power of two 2^k, fp32 log2 rounds up to k and torchao keeps 2^k where the exact
    # floor is 2^(k-1): those are counted and must be exactly the s in
    # (2^k (1 - 2^-16), 2^k).
    dt = ELEMS[elem][0]
    name = PLAIN_NAME[elem] + ":blockwise_1x128" + (":pow2" if pow2 else "")
    amax = np.abs(finite.ravel())
    col = amax.reshape(-1, 1)
    _, _, scales, _ = formats.quantize(col, name)
    want = f8u.amax_to_scale(torch.from_numpy(amax), dt, round_scales_to_power_of_2=pow2).numpy()
    ok = same_bits(scales, want)
    if pow2:
        raw = f8u.amax_to_scale(torch.from_numpy(amax), dt).numpy()
        m = raw.view(np.uint32) & 0x7FFFFF
        near = m > 0x7FFFFF - (1 << 7)
        assert ok[~near].all()
        assert (want[~ok] == 2 * scales[~ok]).all()
        print("pow2: %d of %d scales where torch.log2 rounds up" % ((~ok).sum(), ok.size))
    else:
        assert ok.all(), "first mismatch at %d" % np.flatnonzero(~ok)[0]
    report("torchao amax_to_scale %s pow2=%s" % (elem, pow2), int(ok.sum()))


@pytest.mark.parametrize("elem", ["e4m3", "e5m2"])
def test_fp8_current_scaling_matches_torchao(elem, finite):
    # per tensor (current scaling): s = amax_to_scale(amax), codes to_fp8_saturated(x * s)
    # (torchao's hp_tensor_and_scale_to_float8), dequantized x_fp8 / s.
    dt = ELEMS[elem][0]
    xt = torch.from_numpy(finite)
    s = f8u.amax_to_scale(xt.abs().max(), dt)
    q = f8u.to_fp8_saturated(xt * s, dt)
    ty = (q.to(torch.float32) / s).numpy()
    y, codes, scales, _ = formats.quantize(finite, PLAIN_NAME[elem])
    assert same_bits(scales, s.numpy().reshape(1)).all()
    assert (codes.ravel() == q.view(torch.uint8).numpy().ravel()).all()
    assert same_bits(y, ty).all()
    report("torchao current scaling %s" % elem, finite.size)


@pytest.mark.parametrize("tile", ["1x128", "128x128"])
def test_fp8_blockwise_matches_torchao_references(tile, data):
    # torchao's torch_blockwise_scale_act_quant_lhs (1x128) and _weight_quant (128x128):
    # codes, and their returned reciprocal scale fp32(1 / s) against gradprec's s; the
    # dequantized value is code * fp32(1 / s).
    xt = torch.from_numpy(data)
    if tile == "1x128":
        q, rs = bw.torch_blockwise_scale_act_quant_lhs(xt, 128)
    else:
        q, rs = bw.torch_blockwise_scale_weight_quant(xt, 128)
    y, codes, scales, _ = formats.quantize(data, "fp8_e4m3:blockwise_" + tile)
    rs = rs.contiguous().numpy().ravel()
    with np.errstate(divide="ignore", invalid="ignore"):
        mine = (np.float64(1.0) / scales.astype(np.float64)).astype(np.float32)
    assert same_bits(mine, rs).all()
    assert (codes.ravel() == q.contiguous().view(torch.uint8).numpy().ravel()).all()
    qf = q.to(torch.float32).numpy()
    rep = np.repeat(rs.reshape(-1, 1), 128, axis=1).reshape(data.shape) if tile == "1x128" else \
        np.kron(rs.reshape(ROWS // 128, 1), np.ones((128, 128), dtype=np.float32))
    with np.errstate(invalid="ignore"):  # a NaN block: code NaN times its scale
        assert same_bits(y, (qf * rep).astype(np.float32)).all()
    report("torchao blockwise %s" % tile, data.size)


def test_delayed_scaling_by_hand():
    # Transformer Engine's DelayedScaling: sf = (448 / amax) / 2^margin in fp32; amax 0
    # or non-finite keeps the previous scale. By hand: amax 2 -> 224, margin 1 -> 112;
    # amax 3 -> fp32(149.333...) = 0x43155555; 0, inf, NaN keep 5.0; e5m2 57344/7 in fp32.
    d = formats.fp8_delayed_scale
    assert d("fp8_e4m3", 2.0) == 224.0
    assert d("fp8_e4m3", 2.0, margin=1) == 112.0
    assert np.float32(d("fp8_e4m3", 3.0)).view(np.uint32) == 0x43155555
    for bad in (0.0, float("inf"), float("nan")):
        assert d("fp8_e4m3", bad, prev=5.0) == 5.0
    assert np.float32(d("fp8_e5m2", 7.0)) == np.float32(57344.0 / 7.0)
    assert d("fp8_e4m3", 3.0, pow2=True) == 128.0
    assert np.isnan(d("mxfp4", 1.0))


def test_nvfp4_two_level_reciprocal_at_e2m1_midpoints():
    # Two-level NVFP4 multiplies x by r = fp32(fp32(1 / ts) / s) (torchao's nvfp4_quantize,
    # "to match the MSLK triton kernel"); r' = fp32(1 / (ts * s)) is often an ulp away. The
    # difference shows only for x * r within an ulp of an e2m1 midpoint (0.25, 0.75, 1.25,
    # 1.75, 2.5, 3.5, 5): here 15 elements per block sit on the 17 fp32 neighbours of
    # midpoint / r, r computed with numpy from torchao's own scales (the block's amax, its
    # first element, keeps the scales). Compared bit for bit with torchao; the blocks where
    # r != r' are counted (they must exist, else the data could not tell the two apart).
    rng = np.random.default_rng(11)
    nb = 4096
    amax = (rng.uniform(1, 2, size=nb) * np.exp2(rng.integers(-20, 20, size=nb))).astype(np.float32)
    x = np.zeros((nb, 16), dtype=np.float32)
    x[:, 0] = amax
    x[:, 1:] = amax[:, None] * 1e-3
    pts = nv.per_tensor_amax_to_scale(torch.from_numpy(x).abs().max())
    t = nv.NVFP4Tensor.to_nvfp4(torch.from_numpy(x.reshape(-1, 128)), per_tensor_scale=pts)
    s = t.scale.view(torch.uint8).numpy().ravel().view(ml_dtypes.float8_e4m3fn).astype(np.float32)
    ts = np.float32(pts.numpy())
    r = (np.float32(1) / ts) / s
    r1 = np.float32(1) / (ts * s)
    mids = np.array([0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0], dtype=np.float32)
    centre = (mids[rng.integers(0, 7, size=(nb, 15))] / r[:, None]).astype(np.float32)
    step = rng.integers(-8, 9, size=(nb, 15)).astype(np.int32)
    x[:, 1:] = (centre.view(np.int32) + step).view(np.float32) * rng.choice([-1, 1], size=(nb, 15)).astype(np.float32)
    xt = torch.from_numpy(x.reshape(-1, 128))
    t = nv.NVFP4Tensor.to_nvfp4(xt, per_tensor_scale=pts)
    assert (t.scale.view(torch.uint8).numpy().ravel().view(ml_dtypes.float8_e4m3fn).astype(np.float32) == s).all()
    y, _, scales, mts = formats.quantize(x.reshape(-1, 128), "nvfp4")
    assert np.float32(mts) == ts and same_bits(scales, s).all()
    assert same_bits(y, t.dequantize(torch.float32).numpy()).all()
    differ = int((r != r1).sum())
    assert differ > 0
    report("NVFP4 two-level at e2m1 midpoints (%d of %d blocks with r != r')" % (differ, nb), x.size)
