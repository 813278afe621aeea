"""DeiT (distilled), BEiT, ViT-MAE and VideoMAE are counted exactly, and Swin is refused with its
reason: each release's config.json (bundled in advisor/model_configs where a published count
was found, whose index says where each came from; the others below, as their Hub configs give
them) and variants of every flag the readers read give the number of parameters transformers
5.24 builds (the class architectures[0] names, on the meta device). A token is a patch (a
tubelet for VideoMAE) or a class / distillation token; one image's tokens are the default
sequence length. A masked autoencoder's encoder reads only the visible patches."""

import pytest

from advisor.engine import estimate
from advisor.engine.activations import training_activations
from advisor.engine.architecture import architecture_from_config, known_families
from advisor.engine.compute import training_flops_per_token
from advisor.engine.errors import ConfigError
from advisor.engine.memory_terms import ENCODER_ONLY_FAMILIES
from advisor.engine.models import EstimateRequest
from advisor.engine.shape import shape_from_architecture
from advisor.engine.workload import build_workload
from advisor.model_configs import find_bundled
from tests.engine.inputs import default_catalog

# repo_id -> (family, transformers' count, tokens per image)
BUNDLED = {
    "facebook/deit-tiny-patch16-224": ("vit", 5_717_416, 197),
    "facebook/deit-small-patch16-224": ("vit", 22_050_664, 197),
    "facebook/deit-base-patch16-224": ("vit", 86_567_656, 197),
    "facebook/deit-tiny-distilled-patch16-224": ("deit", 5_910_800, 198),
    "facebook/deit-small-distilled-patch16-224": ("deit", 22_436_432, 198),
    "facebook/deit-base-distilled-patch16-224": ("deit", 87_338_192, 198),
    "microsoft/beit-base-patch16-224": ("beit", 86_530_984, 197),
    "microsoft/beit-large-patch16-224": ("beit", 304_430_568, 197),
}


def bundled(repo_id: str) -> dict:
    return find_bundled(repo_id).config


def _vit(d: int, heads: int, inter: int, layers: int = 12, **fields) -> dict:
    return {
        "hidden_size": d,
        "num_attention_heads": heads,
        "intermediate_size": inter,
        "num_hidden_layers": layers,
        "image_size": 224,
        "patch_size": 16,
        "num_channels": 3,
        "qkv_bias": True,
        **fields,
    }


def mae(d: int, heads: int, inter: int, layers: int, **fields) -> dict:
    """facebook/vit-mae-* config.json: ViTMAEForPreTraining, mask_ratio 0.75, a decoder of 8
    layers 512 wide (16 heads, 2048), norm_pix_loss false (transformers' ViTMAEConfig defaults
    and the MAE paper, arXiv:2111.06377, section 3 and table 1)."""
    return {
        "model_type": "vit_mae",
        "architectures": ["ViTMAEForPreTraining"],
        "mask_ratio": 0.75,
        "norm_pix_loss": False,
        "decoder_hidden_size": 512,
        "decoder_num_hidden_layers": 8,
        "decoder_num_attention_heads": 16,
        "decoder_intermediate_size": 2048,
        **_vit(d, heads, inter, layers),
        **fields,
    }


def videomae(d, heads, inter, layers, decoder, **fields) -> dict:
    """MCG-NJU/videomae-* config.json (found with the 'docs' search corpus: 16 frames,
    tubelet 2, qkv_bias true, use_mean_pooling false for the pre-trained models)."""
    dd, dlayers, dheads, dinter = decoder
    return {
        "model_type": "videomae",
        "architectures": ["VideoMAEForPreTraining"],
        "num_frames": 16,
        "tubelet_size": 2,
        "use_mean_pooling": False,
        "norm_pix_loss": True,
        "decoder_hidden_size": dd,
        "decoder_num_hidden_layers": dlayers,
        "decoder_num_attention_heads": dheads,
        "decoder_intermediate_size": dinter,
        **_vit(d, heads, inter, layers),
        **fields,
    }


KINETICS = {"id2label": {str(i): f"class {i}" for i in range(400)}}
VIDEOMAE_BASE = videomae(768, 12, 3072, 12, (384, 4, 6, 1536))
VIDEOMAE_LARGE = videomae(1024, 16, 4096, 24, (512, 12, 8, 2048))
CLASSIFIER = {"architectures": ["VideoMAEForVideoClassification"], "use_mean_pooling": True}

# Releases not bundled (no published count of the class transformers builds was found): the
# config, family, transformers' count, the encoder's tokens and the decoder's (or the only
# stack's) tokens per image or clip.
UNBUNDLED = {
    "facebook/vit-mae-base": (mae(768, 12, 3072, 12), "vit_mae", 111_907_840, 50, 197),
    "facebook/vit-mae-large": (mae(1024, 16, 4096, 24), "vit_mae", 329_541_888, 50, 197),
    "facebook/vit-mae-huge": (
        mae(1280, 16, 5120, 32, patch_size=14),
        "vit_mae",
        657_074_508,
        65,
        257,
    ),
    "MCG-NJU/videomae-base": (VIDEOMAE_BASE, "videomae", 94_210_944, 160, 1568),
    "MCG-NJU/videomae-large": (VIDEOMAE_LARGE, "videomae", 342_996_992, 160, 1568),
    "MCG-NJU/videomae-base-finetuned-kinetics": (
        {**VIDEOMAE_BASE, **CLASSIFIER, **KINETICS, "norm_pix_loss": False},
        "videomae",
        86_534_800,
        None,
        1568,
    ),
    "MCG-NJU/videomae-large-finetuned-kinetics": (
        {**VIDEOMAE_LARGE, **CLASSIFIER, **KINETICS, "norm_pix_loss": False},
        "videomae",
        304_270_736,
        None,
        1568,
    ),
}


@pytest.mark.parametrize("repo_id", BUNDLED)
def test_bundled_releases_count_as_transformers_builds_them(repo_id):
    family, params, tokens = BUNDLED[repo_id]
    arch = architecture_from_config(bundled(repo_id))

    assert (arch.family, arch.params_total, arch.params_active) == (family, params, params)
    assert arch.max_position_embeddings == tokens  # the default sequence: one image
    assert arch.exact
    assert arch.vocab_size == 0
    assert arch.family in ENCODER_ONLY_FAMILIES


@pytest.mark.parametrize("repo_id", UNBUNDLED)
def test_masked_autoencoders_and_video_classifiers_count_as_transformers_builds_them(repo_id):
    config, family, params, visible, tokens = UNBUNDLED[repo_id]
    arch = architecture_from_config(config)

    assert (arch.family, arch.params_total, arch.params_active) == (family, params, params)
    assert arch.encoder_positions == visible  # what the encoder reads of each image or clip
    assert arch.max_position_embeddings == tokens
    assert arch.is_encoder_decoder == (visible is not None)


# Variants of every flag the readers read: transformers 5.24's count on the meta device.
def _deit(**fields) -> dict:
    return {**bundled("facebook/deit-tiny-distilled-patch16-224"), **fields}


def _beit(**fields) -> dict:
    return {**bundled("microsoft/beit-base-patch16-224"), "num_hidden_layers": 2, **fields}


THREE = {"id2label": {"0": "a", "1": "b", "2": "c"}}
VARIANTS = [
    (_deit(architectures=["DeiTForImageClassification"], **THREE), 5_525_379),
    (_deit(architectures=["DeiTModel"]), 5_561_856),
    (_deit(architectures=["DeiTModel"], pooler_output_size=100), 5_544_100),
    (_deit(architectures=["DeiTForMaskedImageModeling"], encoder_stride=8), 5_562_048),
    (_deit(qkv_bias=False, image_size=384, patch_size=32, num_channels=1, **THREE), 5_558_214),
    (_beit(architectures=["BeitModel"]), 14_787_744),
    (_beit(architectures=["BeitModel"], use_mean_pooling=False), 14_787_744),
    (
        _beit(
            architectures=["BeitForMaskedImageModeling"],
            use_mask_token=True,
            use_shared_relative_position_bias=True,
            use_relative_position_bias=False,
            use_mean_pooling=False,
        ),
        21_080_912,
    ),
    (
        _beit(
            use_absolute_position_embeddings=True,
            layer_scale_init_value=0.0,
            image_size=384,
            **THREE,
        ),
        15_265_635,
    ),
    (
        _beit(
            use_mean_pooling=False,
            use_shared_relative_position_bias=True,
            image_size=160,
            patch_size=32,
            **THREE,
        ),
        16_544_979,
    ),
    ({**mae(768, 12, 3072, 12), "architectures": ["ViTMAEModel"]}, 85_798_656),
    (
        mae(
            768,
            12,
            3072,
            2,
            qkv_bias=False,
            decoder_hidden_size=256,
            decoder_num_hidden_layers=3,
            decoder_num_attention_heads=8,
            decoder_intermediate_size=1000,
            image_size=160,
            patch_size=8,
            num_channels=1,
            mask_ratio=0.6,
        ),
        17_178_104,
    ),
    ({**VIDEOMAE_BASE, "architectures": ["VideoMAEModel"], "num_hidden_layers": 2}, 15_356_160),
    (
        {
            **VIDEOMAE_BASE,
            "architectures": ["VideoMAEModel"],
            "num_hidden_layers": 2,
            "use_mean_pooling": True,
        },
        15_354_624,
    ),
    (
        {
            **VIDEOMAE_BASE,
            **CLASSIFIER,
            **THREE,
            "num_hidden_layers": 2,
            "use_mean_pooling": False,
            "qkv_bias": False,
            "num_frames": 8,
            "tubelet_size": 4,
        },
        16_535_043,
    ),
    (
        {
            **VIDEOMAE_BASE,
            "num_hidden_layers": 2,
            "qkv_bias": False,
            "use_mean_pooling": True,
            "num_frames": 8,
            "tubelet_size": 4,
            "image_size": 112,
            "decoder_hidden_size": 192,
            "decoder_num_hidden_layers": 2,
            "decoder_num_attention_heads": 4,
            "decoder_intermediate_size": 500,
        },
        17_954_344,
    ),
]


@pytest.mark.parametrize(("config", "params"), VARIANTS)
def test_flag_variants_count_as_transformers_builds_them(config, params):
    arch = architecture_from_config(config)

    assert arch.params_total == params
    assert arch.exact


def test_tokens_are_patches_and_class_tokens():
    deit = architecture_from_config(bundled("facebook/deit-base-distilled-patch16-224"))
    beit = architecture_from_config(bundled("microsoft/beit-base-patch16-224"))
    bare_mae = architecture_from_config(
        {**mae(768, 12, 3072, 12), "architectures": ["ViTMAEModel"]}
    )

    assert deit.max_position_embeddings == 14 * 14 + 2  # [CLS] and the distillation token
    assert any("198 tokens" in note for note in deit.notes)
    assert beit.max_position_embeddings == 197
    # ViTMAEModel masks its input too: it encodes 49 of 196 patches and [CLS].
    assert bare_mae.max_position_embeddings == 50


def test_the_distilled_deit_has_two_heads_and_beit_its_layer_scale_and_position_biases():
    deit = architecture_from_config(bundled("facebook/deit-base-distilled-patch16-224"))
    classifier = architecture_from_config(
        {
            **bundled("facebook/deit-base-distilled-patch16-224"),
            "architectures": ["DeiTForImageClassification"],
        }
    )
    beit = architecture_from_config(bundled("microsoft/beit-base-patch16-224"))
    no_biases = architecture_from_config(
        {
            **bundled("microsoft/beit-base-patch16-224"),
            "use_relative_position_bias": False,
            "layer_scale_init_value": 0,
        }
    )

    assert deit.params_total - classifier.params_total == 768 * 1000 + 1000
    # 12 blocks x ((2 x 14 - 1)^2 + 3 = 732 distances x 12 heads + two 768-wide scales)
    assert beit.params_total - no_biases.params_total == 12 * (732 * 12 + 2 * 768)


def test_beit_masked_image_modelling_scores_patches_against_its_visual_vocabulary():
    config = _beit(architectures=["BeitForMaskedImageModeling"], use_mask_token=True)
    arch = architecture_from_config(config)
    request = EstimateRequest(config=config, task="pretrain", tokens=10**8, micro_batch=8)

    result = estimate(request, default_catalog())

    assert arch.vocab_size == 8192
    assert arch.params_lm_head == 768 * 8192 + 8192
    assert result.memory.logits > 0  # pre-training scores every patch against 8,192 tokens
    classifier = estimate(
        EstimateRequest(config=bundled("microsoft/beit-base-patch16-224"), **_job("pretrain")),
        default_catalog(),
    )
    assert classifier.memory.logits == 0


def _job(task: str) -> dict:
    return {"task": task, "tokens": 10**8, "micro_batch": 32, "gradient_checkpointing": False}


def _shape_and_workload(config: dict, task: str):
    shape = shape_from_architecture(architecture_from_config(config))
    request = EstimateRequest(config=config, **_job(task))
    return shape, build_workload(request, shape)


def test_mae_pretraining_encodes_only_the_visible_patches():
    config = UNBUNDLED["facebook/vit-mae-base"][0]
    shape, wl = _shape_and_workload(config, "pretrain")
    every_patch, wl_all = _shape_and_workload({**config, "mask_ratio": 0.0}, "pretrain")

    assert (wl.seq_len, wl.encoder_len, wl.decoder_len) == (197, 50, 197)
    assert wl_all.encoder_len == 197
    assert shape.encoder_view().hidden_size == 768
    assert shape.hidden_size == 512
    assert not shape.cross_attends
    # Masking 75 % of the patches halves the step (the MAE paper reports ~3x for the encoder)
    # and the activations.
    ratio = training_flops_per_token(shape, wl) / training_flops_per_token(every_patch, wl_all)
    assert 0.4 < ratio < 0.6
    saved = training_activations(shape, wl) / training_activations(every_patch, wl_all)
    assert 0.4 < saved < 0.6


def test_mae_encoder_and_decoder_flops_are_each_stacks_own():
    """Matmul FLOPs per image: 6 x (encoder x 50 tokens + decoder x 197 tokens); attention
    12 x (12 layers x 768 x 50^2 + 8 layers x 512 x 197^2), no cross-attention."""
    config = UNBUNDLED["facebook/vit-mae-base"][0]
    shape, wl = _shape_and_workload(config, "pretrain")
    encoder = shape.params_encoder
    decoder = shape.flop_params - encoder
    expected = 6 * (encoder * 50 + decoder * 197) + 12 * (12 * 768 * 50**2 + 8 * 512 * 197**2)

    assert training_flops_per_token(shape, wl) * 197 == pytest.approx(expected)


def test_videomae_pretraining_sees_a_tenth_of_the_tubelets():
    shape, wl = _shape_and_workload(VIDEOMAE_BASE, "pretrain")

    assert (wl.seq_len, wl.encoder_len, wl.decoder_len) == (1568, 160, 1568)
    assert shape.encoder_view().hidden_size == 768
    assert shape.hidden_size == 384


def test_vision_encoders_keep_no_kv_cache_and_generate_nothing():
    for config in (
        bundled("facebook/deit-base-distilled-patch16-224"),
        bundled("microsoft/beit-base-patch16-224"),
        UNBUNDLED["facebook/vit-mae-base"][0],
        UNBUNDLED["MCG-NJU/videomae-base-finetuned-kinetics"][0],
    ):
        result = estimate(
            EstimateRequest(config=config, task="inference", tokens=10**7, precision="bf16"),
            default_catalog(),
        )
        params = architecture_from_config(config).params_total

        assert result.memory.kv_cache == 0
        assert result.memory.logits == 0
        assert result.memory.weights == pytest.approx(2 * params, rel=0.01)


def test_new_tokens_are_refused_for_a_vision_encoder():
    request = EstimateRequest(
        config=UNBUNDLED["facebook/vit-mae-base"][0], task="inference", new_tokens=16
    )

    with pytest.raises(Exception, match="encoder-only"):
        estimate(request, default_catalog())


def test_fine_tuning_videomae_sizes_one_clip_of_tubelets():
    config = UNBUNDLED["MCG-NJU/videomae-base-finetuned-kinetics"][0]
    shape, wl = _shape_and_workload(config, "full_finetune")

    assert wl.seq_len == 1568
    assert not wl.encoder_len


def test_swin_is_refused_with_its_reason():
    config = {
        "model_type": "swin",
        "architectures": ["SwinForImageClassification"],
        "embed_dim": 96,
        "depths": [2, 2, 6, 2],
        "num_heads": [3, 6, 12, 24],
        "window_size": 7,
    }

    with pytest.raises(ConfigError) as raised:
        architecture_from_config(config)

    assert "Swin" in str(raised.value)
    assert "stages" in str(raised.value)
    assert raised.value.field == "model_type"
    assert "swin" not in known_families()
    assert {"deit", "beit", "vit_mae", "videomae"} <= set(known_families())
