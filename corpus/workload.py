"""The workload behind the real-kernel corpora: small tinygrad programs covering what its kernels do (elementwise ops and
casts, reductions, matmul and conv2d, softmax / layernorm, argmax, cumsum, transcendentals, int division and bitwise ops,
random numbers, views, symbolic shapes, a training step), for tinygrad 0.10.1 and 0.14 (where their APIs differ, the
line's own spelling). Run on the default device; regenerate the corpora with `python corpus/regenerate.py`. Inputs are
small and fixed (seeded), so the cases are too."""
import sys

import numpy as np
from tinygrad import Device, Tensor, Variable, dtypes, nn

# half where tinygrad 0.10.1 runs it: its emulator only on Python 3.12+, its GPU only with cl_khr_fp16 (PoCL on CPUs lacks it)
HALF = {"PYTHON": sys.version_info >= (3, 12), "GPU": "cl_khr_fp16" in getattr(Device[Device.DEFAULT], "device_exts", "")}
HALF = HALF.get(Device.DEFAULT, True)
LINE_0_14 = not hasattr(Tensor, "train")  # tinygrad 0.14: no Tensor.train(), WHERE's condition is the tensor itself

rng = np.random.default_rng(0)
def f32(*shape, lo=-4.0, hi=4.0): return Tensor(rng.uniform(lo, hi, shape).astype(np.float32))
def i32(*shape, lo=-100, hi=100): return Tensor(rng.integers(lo, hi, shape).astype(np.int32))

a, b, m = f32(64), f32(64), f32(16, 16)
ints, small = i32(64), i32(64, lo=1, hi=9)
uints = ints.cast(dtypes.uint32)
out = []

# elementwise, casts, where / maximum
out += [a + b, a * b, a - b, a / (b.abs() + 1), -a, a.maximum(b), (a > b).where(a, b),
        (a > 0).where(a.sqrt(), 0) if LINE_0_14 else a.sqrt().where(a > 0, 0)]
out += [a.cast(dtypes.int32), ints.cast(dtypes.float32), ints.cast(dtypes.uint8), a.cast(dtypes.bool),
        ints.cast(dtypes.int64) * 3, a.cast(dtypes.float64) + 1]
if HALF: out += [a.cast(dtypes.half), a.cast(dtypes.half).cast(dtypes.float32) * 2, (a.cast(dtypes.half) * 3).sum()]
out += [a.clip(-1, 1), a.relu(), a.sigmoid(), a.abs(), a.floor(), a.ceil()]
# transcendentals
out += [a.exp(), (a.abs() + 0.5).log(), a.sin(), a.cos(), (a.abs() + 1).sqrt(), a.exp2(), (a.abs() + 1).log2(), a.tanh()]
# ints: division, modulo, bitwise, shifts
out += [ints // small, ints % small, ints & 0x5a, ints | small, ints ^ small, uints.lshift(2), uints.rshift(1), ints.max(),
        ints.sum(), (ints < small).where(ints, small)]
# reductions
out += [m.sum(), m.sum(axis=0), m.sum(axis=1), m.max(axis=1), m.mean(), m.min(axis=0), m.std(), a.sum(), a.max(),
        m.argmax(axis=1), m.argmax(), a.cumsum(), m.cumsum(axis=1)]
# matmul, conv2d, softmax, layernorm
out += [m @ m, f32(8, 32) @ f32(32, 8), m.softmax(axis=1), m.log_softmax(axis=1), m.layernorm(axis=1)]
x4 = f32(1, 3, 8, 8)
out += [x4.conv2d(f32(4, 3, 3, 3)), x4.conv2d(f32(4, 3, 3, 3), padding=1).relu().max_pool2d(), x4.avg_pool2d()]
# views: pad, shrink, permute, expand, flip
out += [m.pad(((1, 1), (2, 0))) + 1, m.shrink(((2, 10), (0, 8))) * 2, m.permute(1, 0) + m, m[::2, 1::3] - 1,
        a.reshape(8, 8).expand(2, 8, 8) * 1.5, m.flip(0) + m, m.transpose().contiguous()]
# random numbers
Tensor.manual_seed(42)
out += [Tensor.rand(64), Tensor.randn(16), Tensor.randint(32, low=0, high=10)]
# symbolic shapes
n = Variable("n", 1, 16).bind(5)
out += [Tensor.ones(n, 4).contiguous().sum(), (Tensor.ones(n, 8) * 3).contiguous()]
for t in out: t.realize()

# a tiny MLP training step (SGD, MSE)
class MLP:
  def __init__(self): self.l1, self.l2 = nn.Linear(8, 16), nn.Linear(16, 4)
  def __call__(self, x): return self.l2(self.l1(x).relu())
model = MLP()
opt = nn.optim.SGD(nn.state.get_parameters(model), lr=2**-6)
def training():
  """Training mode: tinygrad 0.10.1's Tensor.train(), tinygrad 0.14's Context(TRAINING=1)."""
  if not LINE_0_14: return Tensor.train()
  from tinygrad.helpers import Context
  return Context(TRAINING=1)

with training():
  loss = ((model(f32(4, 8)) - f32(4, 4)) ** 2).mean()
  opt.zero_grad()
  loss.backward()
  opt.step()
loss.realize()
