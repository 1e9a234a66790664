"""The models the torch frontend's coverage is measured on: small `transformers` models built from configs with
random weights (nothing is downloaded: no pretrained weights, no tokenizers), and nanoGPT's block, each in eval
mode with the inputs its forward pass takes (token ids with a padding mask, images, spectrograms)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
import transformers

from tests.stdlib_ops.frontends.nanogpt import Block, BlockConfig

BATCH, SEQUENCE, VOCAB = 2, 8, 64


@dataclass(frozen=True)
class CoverageModel:
    """A model in eval mode and the keyword arguments of its forward pass; `layers` (blocks in sequence) and
    `widest` (the most terms a sum of the forward pass adds: a matmul's inner size, a convolution's
    channels x taps, a softmax's keys, a norm's features) bound its float32 rounding."""

    model: torch.nn.Module
    inputs: dict[str, torch.Tensor]
    layers: int
    widest: int


def token_inputs() -> dict[str, torch.Tensor]:
    """Token ids and an attention mask that pads the second sequence's last three positions."""
    ids = torch.randint(0, VOCAB, (BATCH, SEQUENCE), generator=torch.Generator().manual_seed(1))
    mask = torch.ones(BATCH, SEQUENCE, dtype=torch.long)
    mask[1, SEQUENCE - 3:] = 0
    return {"input_ids": ids, "attention_mask": mask}


def gpt2() -> CoverageModel:
    """GPT-2 with its language-model head (tied to the token embedding), learned positions, Conv1D layers."""
    config = transformers.GPT2Config(vocab_size=VOCAB, n_positions=16, n_embd=32, n_layer=2, n_head=2,
                                     bos_token_id=0, eos_token_id=0, use_cache=False)
    return CoverageModel(transformers.GPT2LMHeadModel(config), token_inputs(), 2, 4 * 32)


def bert() -> CoverageModel:
    """BERT's encoder with its pooler: absolute positions, token types, post-norm layers."""
    config = transformers.BertConfig(vocab_size=VOCAB, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                                     intermediate_size=64, max_position_embeddings=16)
    return CoverageModel(transformers.BertModel(config), token_inputs(), 2, 64)


def llama() -> CoverageModel:
    """Llama with its head: RMS norms, rotary positions, grouped-query attention (4 heads over 2), SwiGLU."""
    config = transformers.LlamaConfig(vocab_size=VOCAB, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=16,
                                      use_cache=False)
    return CoverageModel(transformers.LlamaForCausalLM(config), token_inputs(), 2, 64)


def mistral() -> CoverageModel:
    """Mistral: Llama's architecture with a sliding attention window (4 positions, shorter than the sequence)."""
    config = transformers.MistralConfig(vocab_size=VOCAB, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=16,
                                        sliding_window=4, use_cache=False)
    return CoverageModel(transformers.MistralModel(config), token_inputs(), 2, 64)


def t5_encoder() -> CoverageModel:
    """T5's encoder: relative position buckets, RMS norms without a mean, unscaled attention."""
    config = transformers.T5Config(vocab_size=VOCAB, d_model=32, d_kv=8, d_ff=64, num_layers=2, num_heads=4,
                                   relative_attention_num_buckets=8, relative_attention_max_distance=16)
    return CoverageModel(transformers.T5EncoderModel(config), token_inputs(), 2, 64)


def vit() -> CoverageModel:
    """ViT: a patch convolution, a class token, learned positions, pre-norm layers, and its pooler."""
    config = transformers.ViTConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
                                    image_size=16, patch_size=4, num_channels=3)
    images = torch.randn(BATCH, 3, 16, 16, generator=torch.Generator().manual_seed(2))
    return CoverageModel(transformers.ViTModel(config), {"pixel_values": images}, 2, 3 * 4 * 4)


def whisper_encoder() -> CoverageModel:
    """Whisper's encoder: two 1-D convolutions over mel features, sinusoidal positions, pre-norm layers."""
    config = transformers.WhisperConfig(vocab_size=VOCAB, d_model=32, encoder_layers=2, encoder_attention_heads=2,
                                        encoder_ffn_dim=64, num_mel_bins=8, max_source_positions=8,
                                        pad_token_id=0, bos_token_id=0, eos_token_id=0, decoder_start_token_id=0)
    from transformers.models.whisper.modeling_whisper import WhisperEncoder

    features = torch.randn(BATCH, 8, 16, generator=torch.Generator().manual_seed(3))  # 2 frames a position
    return CoverageModel(WhisperEncoder(config), {"input_features": features}, 2, 32 * 3)


def nanogpt_block(flash: bool) -> Callable[[], CoverageModel]:
    """nanoGPT's block with its masked_fill attention or (flash) scaled_dot_product_attention."""

    def build() -> CoverageModel:
        config = BlockConfig(flash=flash)
        x = torch.randn(BATCH, SEQUENCE, config.n_embd, generator=torch.Generator().manual_seed(4))
        return CoverageModel(Block(config), {"x": x}, 1, 4 * config.n_embd)

    return build


MODELS: dict[str, Callable[[], CoverageModel]] = {
    "gpt2": gpt2, "bert": bert, "llama": llama, "mistral": mistral, "t5-encoder": t5_encoder, "vit": vit,
    "whisper-encoder": whisper_encoder, "nanogpt-block": nanogpt_block(False),
    "nanogpt-block-flash": nanogpt_block(True),
}


def built(name: str) -> CoverageModel:
    """Model `name` with its weights drawn from seed 0, in eval mode."""
    torch.manual_seed(0)
    case = MODELS[name]()
    case.model.eval()
    return case


def outputs(result: Any) -> list[torch.Tensor]:
    """The tensors of a forward pass's result (a transformers ModelOutput, a tuple or a tensor), in order."""
    if isinstance(result, torch.Tensor):
        return [result]
    values = result.to_tuple() if hasattr(result, "to_tuple") else result
    return [t for v in values for t in outputs(v)]
