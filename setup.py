"""speechkit: Kaldi/ESPnet-style speech toolkit (recipes under egs/, speechkit-* command-line tools)."""
from setuptools import find_packages, setup

# Every speechkit-* command: one module in speechkit/bin with a main(argv=None) -> int.
CLIS = {
    # data directories and corpora
    "speechkit-validate-data-dir": "validate_data_dir",
    "speechkit-fix-data-dir": "fix_data_dir",
    "speechkit-subset-data-dir": "subset_data_dir",
    "speechkit-split-data-dir": "split_data_dir",
    "speechkit-combine-data-dirs": "combine_data_dirs",
    "speechkit-copy-data-dir": "copy_data_dir",
    "speechkit-prepare-corpus": "prepare_corpus",
    "speechkit-split-corpus": "split_corpus",
    "speechkit-perturb-data-dir-speed": "perturb_data_dir_speed",
    "speechkit-resample": "resample",  # the wav.scp pipe for what sox cannot read (MP3, Opus)
    # features
    "speechkit-compute-feats": "compute_feats",
    "speechkit-compute-cmvn-stats": "compute_cmvn_stats",
    # training (tasks registered by name in speechkit.train.tasks)
    "speechkit-train": "train",
    "speechkit-average-checkpoints": "average_checkpoints",
    # zerospeech2019
    "speechkit-extract-units": "extract_units",
    "speechkit-resynthesize": "resynthesize",
    "speechkit-make-abx-items": "make_abx_items",
    "speechkit-score-abx": "score_abx",
    "speechkit-score-bitrate": "score_bitrate",
    # indic_multilingual
    "speechkit-make-units": "make_units",
    "speechkit-asr-decode": "asr_decode",
    "speechkit-score-wer": "score_wer",
    "speechkit-score-lid": "score_lid",
    # tcstar_salad (and vctk_continual): text front end, forced aligner, acoustic models, scoring
    "speechkit-g2p": "g2p",
    "speechkit-align": "align",
    "speechkit-make-labels": "make_labels",
    "speechkit-tts-synthesize": "tts_synthesize",
    "speechkit-score-mcd": "score_mcd",
    # vctk_continual: speaker embeddings (GE2E via resemblyzer), continual speaker adaptation
    "speechkit-embed-speakers": "embed_speakers",
    "speechkit-train-continual": "train_continual",
    "speechkit-vocode": "vocode",
    "speechkit-score-continual": "score_continual",
    # results pages (every recipe's RESULTS.md)
    "speechkit-record-run": "record_run",
}

setup(
    name="speechkit",
    version="0.1.0",
    description="Stage-based speech recipes (Kaldi/ESPnet style) on a small PyTorch core",
    long_description=open("README.md", encoding="utf-8").read() if __import__("os").path.exists("README.md") else "",
    long_description_content_type="text/markdown",
    license="Apache-2.0",
    python_requires=">=3.10",
    packages=find_packages(include=["speechkit", "speechkit.*"]),
    include_package_data=True,
    package_data={"speechkit": ["py.typed", "scoring/abx/kernels_c.c"]},  # ABX C kernels, built by tools/install.sh
    install_requires=[
        "torch>=2.1",
        "numpy",
        "kaldiio>=2.18",
        "kaldi-native-fbank>=1.20",
        "sentencepiece",
        "librosa>=0.10",
        "soxr",  # resampling (also a librosa dependency); speechkit.data.corpora.mini
        "pyyaml",
        "tqdm",
        "soundfile",
        "pyworld",
        "pysptk",
        "resemblyzer",
        "phonemizer",
        "jiwer",
        "matplotlib",
        "scikit-learn",  # RANSAC latency fits (tcstar_salad), speaker verifier / PCA (vctk_continual)
    ],
    # kaldialign: Kaldi's own edit-distance code, the reference of test/unit/scoring/test_wer.py
    extras_require={"test": ["pytest", "pytest-timeout", "kaldialign"]},
    entry_points={"console_scripts": [f"{cli}=speechkit.bin.{mod}:main" for cli, mod in CLIS.items()]},
)
