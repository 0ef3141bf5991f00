"""Converts a BERT sentence encoder (model.safetensors, vocab.txt, config.json) to a GGUF for llama.cpp.

usage: convert-bert-gguf.py SOURCE_DIR OUT.gguf --name NAME [--outtype f16|f32] [--pooling mean|cls]

infra/fetch-trained-models.py runs it (in a virtual environment with the pinned gguf, numpy and
safetensors of infra/trained-models.json) for a manifest entry with `"convert":
"bert-safetensors-to-gguf"`, and checks the output against the pinned sha256: the same inputs and
the same package versions give the same bytes.

It writes what llama.cpp's own converter (convert_hf_to_gguf.py: `BertModel` and `TextModel` in
conversion/bert.py and conversion/base.py) writes for a plain `BertModel` checkpoint, without torch
or transformers, which that converter imports at its top:

- metadata: architecture `bert`, the hyperparameters of config.json, non-causal attention, and the
  pooling the sentence-transformers pipeline applies (`--pooling`; all-MiniLM-L6-v2's
  1_Pooling/config.json says mean), which llama.cpp's embedding context then applies itself;
- the WordPiece vocabulary of vocab.txt in llama.cpp's "phantom space" form: a word-initial piece
  gets a leading U+2581, a `##` continuation loses its `##`, the five special tokens stay as they
  are and are typed CONTROL; [CLS] is the beginning token and [SEP] the end token, both added to
  every input (sentence-transformers' "[CLS] $A [SEP]");
- the tensors under llama.cpp's names, in the order of the safetensors file, without the pooler
  (unused for embeddings) and any masked-LM head; 2-D weights in F16 for `--outtype f16`
  (position and token-type embeddings stay F32, as in llama.cpp's converter), biases and norms F32.
"""
import argparse
import json
import struct
from pathlib import Path

import gguf
import numpy as np
from safetensors.numpy import load_file

# BERT's special tokens, as BertTokenizer names them; their ids come from vocab.txt.
SPECIAL_TOKENS = ('[PAD]', '[UNK]', '[CLS]', '[SEP]', '[MASK]')
# Checkpoint tensors llama.cpp's converter drops: position ids are implicit, the pooler and the
# masked-LM / next-sentence heads are not part of the sentence embedding.
DROPPED = ('embeddings.position_ids', 'pooler.dense.weight', 'pooler.dense.bias')
DROPPED_PREFIXES = ('cls.',)
POOLING = {'mean': gguf.PoolingType.MEAN, 'cls': gguf.PoolingType.CLS}


def tensor_order(path: Path) -> list[str]:
    """The tensors' names in the order of their data in the file (the header's own order)."""
    with open(path, 'rb') as f:
        (header_len,) = struct.unpack('<Q', f.read(8))
        header = json.loads(f.read(header_len))
    header.pop('__metadata__', None)
    return sorted(header, key=lambda name: header[name]['data_offsets'][0])


def checkpoint_name(name: str) -> str:
    """A BertModel tensor's name as llama.cpp's tensor map knows it (TF-style gamma/beta renamed)."""
    if name.startswith('bert.'):
        name = name[len('bert.'):]
    if name.endswith('.gamma'):
        name = name[: -len('.gamma')] + '.weight'
    if name.endswith('.beta'):
        name = name[: -len('.beta')] + '.bias'
    return name


def keeps_f32(gguf_name: str, data: np.ndarray) -> bool:
    """TextModel.prepare_tensors' rule: vectors, norms, biases and these two embeddings stay F32."""
    return (
        data.ndim <= 1
        or gguf_name.endswith('_norm.weight')
        or not gguf_name.endswith('.weight')
        or gguf_name.startswith(gguf.TENSOR_NAMES[gguf.MODEL_TENSOR.POS_EMBD])
        or gguf_name.startswith(gguf.TENSOR_NAMES[gguf.MODEL_TENSOR.TOKEN_TYPES])
    )


def tensors(source: Path, n_layer: int, outtype: str) -> list[tuple[str, np.ndarray]]:
    """The checkpoint's tensors under llama.cpp's names, in file order, converted to the output type."""
    weights = load_file(str(source / 'model.safetensors'))
    names = gguf.get_tensor_name_map(gguf.MODEL_ARCH.BERT, n_layer)
    out = []
    for name in tensor_order(source / 'model.safetensors'):
        n = checkpoint_name(name)
        if n in DROPPED or n.startswith(DROPPED_PREFIXES):
            continue
        gguf_name = names.get_name(n, try_suffixes=('.weight', '.bias'))
        if gguf_name is None:
            raise SystemExit(f'convert-bert-gguf: no llama.cpp name for the tensor {name!r}')
        data = weights[name].astype(np.float32)
        half = outtype == 'f16' and not keeps_f32(gguf_name, data)
        out.append((gguf_name, data.astype(np.float16) if half else data))
    return out


def vocabulary(source: Path) -> tuple[list[str], list[int], dict[str, int]]:
    """vocab.txt in phantom-space form, the token types, and the special tokens' ids."""
    pieces = (source / 'vocab.txt').read_text(encoding='utf-8').split('\n')
    if pieces and pieces[-1] == '':
        pieces.pop()
    specials = {t: pieces.index(t) for t in SPECIAL_TOKENS if t in pieces}
    missing = set(SPECIAL_TOKENS) - set(specials)
    if missing:
        raise SystemExit(f'convert-bert-gguf: vocab.txt lacks {sorted(missing)}')
    tokens, types = [], []
    for piece in pieces:
        if piece in specials:
            tokens.append(piece)
            types.append(gguf.TokenType.CONTROL)
        else:
            tokens.append(piece[2:] if piece.startswith('##') else '\u2581' + piece)
            types.append(gguf.TokenType.NORMAL)
    if len(set(tokens)) != len(tokens):
        raise SystemExit('convert-bert-gguf: vocab.txt gives duplicate tokens')
    return tokens, types, specials


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('source', type=Path, help='folder with model.safetensors, vocab.txt and config.json')
    ap.add_argument('out', type=Path)
    ap.add_argument('--name', required=True, help='general.name')
    ap.add_argument('--outtype', choices=['f16', 'f32'], default='f16')
    ap.add_argument('--pooling', choices=sorted(POOLING), default='mean', help="the sentence-transformers pipeline's pooling")
    args = ap.parse_args()

    hp = json.loads((args.source / 'config.json').read_text())
    if hp.get('model_type') != 'bert' or hp.get('architectures', ['BertModel'])[0] != 'BertModel':
        raise SystemExit(f"convert-bert-gguf: config.json describes {hp.get('architectures')}, not a BertModel")
    if hp.get('hidden_act', 'gelu') != 'gelu' or hp.get('position_embedding_type', 'absolute') != 'absolute':
        raise SystemExit('convert-bert-gguf: only GELU and absolute position embeddings are supported')
    n_layer = hp['num_hidden_layers']
    weights = tensors(args.source, n_layer, args.outtype)
    tokens, types, specials = vocabulary(args.source)
    if len(tokens) != hp['vocab_size']:
        raise SystemExit(f"convert-bert-gguf: vocab.txt has {len(tokens)} tokens, config.json says {hp['vocab_size']}")

    w = gguf.GGUFWriter(args.out, gguf.MODEL_ARCH_NAMES[gguf.MODEL_ARCH.BERT])
    # General metadata, in the order llama.cpp's converter writes it.
    w.add_type(gguf.GGUFType.MODEL)
    w.add_name(args.name)
    w.add_file_type(gguf.LlamaFileType.MOSTLY_F16 if args.outtype == 'f16' else gguf.LlamaFileType.ALL_F32)
    w.add_quantization_version(gguf.GGML_QUANT_VERSION)
    w.add_size_label(gguf.size_label(sum(data.size for _, data in weights), 0, 0, 0))
    # Hyperparameters.
    w.add_block_count(n_layer)
    w.add_context_length(hp['max_position_embeddings'])
    w.add_embedding_length(hp['hidden_size'])
    w.add_feed_forward_length(hp['intermediate_size'])
    w.add_head_count(hp['num_attention_heads'])
    w.add_layer_norm_eps(hp['layer_norm_eps'])
    w.add_causal_attention(False)
    w.add_pooling_type(POOLING[args.pooling])
    # Vocabulary. llama.cpp ignores the pre-tokenizer name for WordPiece; "jina-v2-en" is what its
    # converter's tokenizer fingerprint gives for this tokenizer (as for bge-small-en-v1.5).
    w.add_token_type_count(hp.get('type_vocab_size', 1))
    w.add_tokenizer_model('bert')
    w.add_tokenizer_pre('jina-v2-en')
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_bos_token_id(specials['[CLS]'])
    w.add_eos_token_id(specials['[SEP]'])
    w.add_unk_token_id(specials['[UNK]'])
    w.add_sep_token_id(specials['[SEP]'])
    w.add_pad_token_id(specials['[PAD]'])
    w.add_mask_token_id(specials['[MASK]'])
    w.add_add_bos_token(True)
    w.add_add_eos_token(True)
    w.add_add_sep_token(False)

    for name, data in weights:
        w.add_tensor(name, data)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    print(f'convert-bert-gguf: wrote {args.out} ({len(weights)} tensors, {args.outtype})')


if __name__ == '__main__':
    main()
