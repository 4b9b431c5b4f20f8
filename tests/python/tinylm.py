# A small language model for the Python tests, defined here (nothing downloaded): token
# embedding + learned positions, one pre-norm transformer block (2 heads, causal),
# an output head; synthetic token sequences of uneven lengths from a fixed seed.
import torch
import torch.nn as nn
import torch.nn.functional as F

VOCAB, DIM, HEADS, FF, MAXLEN = 48, 32, 2, 64, 64


class TinyLM(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(VOCAB, DIM)
        self.pos = nn.Parameter(torch.randn(MAXLEN, DIM) * 0.02)
        self.block = nn.TransformerEncoderLayer(DIM, HEADS, FF, dropout=0.0, batch_first=True, norm_first=True)
        self.head = nn.Linear(DIM, VOCAB)

    def forward(self, x):
        n = x.shape[1]
        h = self.emb(x) + self.pos[:n]
        mask = torch.triu(torch.full((n, n), float("-inf"), dtype=h.dtype, device=h.device), diagonal=1)
        h = self.block(h, src_mask=mask)
        return self.head(h)


def token_losses(model, seq):
    """Per-token next-token cross-entropy of one sequence (shape [1, L]): L - 1 values."""
    logits = model(seq[:, :-1])
    return F.cross_entropy(logits.reshape(-1, VOCAB), seq[:, 1:].reshape(-1), reduction="none")


def sequences(lengths, seed, device="cpu"):
    """The same tokens on every device (drawn on the CPU, then moved)."""
    g = torch.Generator().manual_seed(seed)
    return [torch.randint(0, VOCAB, (1, L), generator=g).to(device) for L in lengths]


def make_model(seed, dtype=torch.float32):
    torch.manual_seed(seed)
    return TinyLM().to(dtype)
