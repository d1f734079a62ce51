"""A user's corpus in every recipe (issue 39): a tiny Common Voice locale folder made here (espeak-ng
voices as five clients, WAV and MP3 clips, validated.tsv with client_id path sentence ... locale), run
through stage 3 of each of the four recipes the one documented way, `./run.sh --corpus commonvoice
--db_root DIR`, with no edit to any run.sh: each recipe makes the sets it needs from the one data dir
(speaker-disjoint where it needs unseen speakers), prints them, and records the setup for later stages.

Everything a recipe writes goes to a temporary folder of links to its files (nothing is written into
egs/); tiny configs, one or two epochs. The walk of each recipe is timed (printed with -s)."""
from __future__ import annotations

import hashlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from speechkit.data.corpora._common import read_phone_alignments
from speechkit.utils.fileio import read_table

pytestmark = pytest.mark.integration

EGS = Path(__file__).resolve().parents[2] / "egs"
SENTENCES = [
    "the cat sat on the mat", "she sells sea shells", "a big red bus came by", "we walked to the park",
    "open the window please", "the sun is very warm", "my dog likes to run", "he reads a good book",
    "they sing in the choir", "bring me a cup of tea", "the river flows north", "green leaves fall down",
    "it rained all day long", "please close the door", "the bird flew away", "we ate fresh bread",
    "the clock struck nine", "a small boat sailed", "she painted the wall", "the train was late",
    "fish swim in the lake", "he fixed the old car", "the moon is bright", "we played a long game",
    "the baby fell asleep", "a cold wind blew in", "the shop opens at ten", "they built a house",
    "the milk is on the table", "I don't like loud noise",
]
# client -> (espeak voice, clips); the first client has the most audio (zerospeech's voice, tcstar's speaker)
CLIENTS = {"alice": ("en-us+f2", 10), "bob": ("en-us+m1", 5), "carol": ("en+f4", 5), "dave": ("en-us+m3", 5),
           "erin": ("en+m5", 5)}


def client_id(name: str) -> str:
    """A 128-hex-digit client id, as Common Voice's."""
    return hashlib.sha512(name.encode()).hexdigest()


def make_commonvoice(root: Path) -> Path:
    """root/en: clips/ (every third clip MP3 at 48 kHz, the others WAV at espeak's 22.05 kHz) and
    validated.tsv in Common Voice's columns; returns the locale folder."""
    loc = root / "en"
    (loc / "clips").mkdir(parents=True)
    rows = ["client_id\tpath\tsentence\tup_votes\tdown_votes\tage\tgender\taccents\tlocale\tsegment"]
    k = 0
    for name, (voice, n) in CLIENTS.items():
        for i in range(n):
            # the first client reads 5 sentences twice: its dev and test clips (tcstar_salad) then hold no
            # phone its training clips lack (the aligner knows only the phones it was trained on)
            text = SENTENCES[i % 5] if name == "alice" else SENTENCES[k]
            stem = f"common_voice_en_{1000 + k}"
            wav = loc / "clips" / f"{stem}.wav"
            subprocess.run(["espeak-ng", "-v", voice, "-s", "200", "-w", str(wav), text], check=True)
            if k % 3 == 2:
                import soxr

                x, sr = sf.read(wav, dtype="float32")
                sf.write(loc / "clips" / f"{stem}.mp3", soxr.resample(x, sr, 48000), 48000, format="MP3")
                wav.unlink()
                clip = f"{stem}.mp3"
            else:
                clip = f"{stem}.wav"
            gender = "female_feminine" if "+f" in voice else "male_masculine"
            rows.append(f"{client_id(name)}\t{clip}\t{text}\t2\t0\t\t{gender}\t\ten\t")
            k += 1
    (loc / "validated.tsv").write_text("\n".join(rows) + "\n", encoding="utf-8")
    return loc


@pytest.fixture(scope="module")
def corpus(require_espeak, tmp_path_factory) -> Path:
    return make_commonvoice(tmp_path_factory.mktemp("cv"))


def work_dir(tmp: Path, recipe: str) -> Path:
    """tmp/<recipe>: links to the recipe's files; what the run writes stays there."""
    work = tmp / recipe
    work.mkdir()
    for name in ("run.sh", "path.sh", "cmd.sh", "utils", "conf", "local"):
        (work / name).symlink_to(EGS / recipe / name)
    return work


ENV = dict(os.environ, PATH=f"{Path(sys.executable).parent}:{os.environ['PATH']}", OMP_NUM_THREADS="1")
# each recipe through stage 3 on the corpus, the documented way, with its tiny settings
WALKS = {
    "zerospeech2019": ["--train_config", "conf/train_vqvae_tiny.yaml", "--tag", "tiny"],
    "tcstar_salad": [],
    "vctk_continual": ["--num_test", "1", "--num_dev", "1", "--world_config", "conf/world_dio.yaml"],
    "indic_multilingual": ["--train_config", "conf/train_mini.yaml", "--speed_perturb", "false",
                           "--variants", "multisoftmax", "--train_opts", "--trainer.max_epochs 1"],
}


@pytest.fixture(scope="module")
def walks(corpus, tmp_path_factory) -> dict[str, tuple[Path, subprocess.CompletedProcess]]:
    """The four walks, started together (one job each: --nj 1) and awaited: {recipe: (work dir, result)};
    their wall times printed (with -s)."""
    tmp = tmp_path_factory.mktemp("walks")
    running = {}
    start = time.monotonic()
    for recipe, extra in WALKS.items():
        work = work_dir(tmp, recipe)
        args = ["--corpus", "commonvoice", "--db_root", str(corpus), "--stop_stage", "3", "--nj", "1", *extra]
        # what the run prints, in files (a pipe could fill while another walk is awaited)
        with open(work / "walk.out", "w") as o, open(work / "walk.err", "w") as e:
            p = subprocess.Popen(["./run.sh", *args], cwd=work, env=ENV, stdout=o, stderr=e, start_new_session=True)
        running[recipe] = (work, args, p)
    out, times = {}, {}
    try:
        while len(times) < len(running):
            assert time.monotonic() - start < 900, f"still running after 900 s: {sorted(set(running) - set(times))}"
            for recipe, (work, args, p) in running.items():
                if recipe not in times and p.poll() is not None:
                    times[recipe] = time.monotonic() - start
                    out[recipe] = (work, subprocess.CompletedProcess(
                        args, p.returncode, (work / "walk.out").read_text(), (work / "walk.err").read_text()))
            time.sleep(0.5)
    finally:
        for _, _, p in running.values():
            if p.poll() is None:  # the run and every job it started
                os.killpg(p.pid, signal.SIGKILL)
    print(f"\nthe four walks through stage 3, started together, ended after "
          + ", ".join(f"{r} {t:.0f} s" for r, t in times.items()))
    return out


def walked(walks, recipe: str) -> tuple[Path, subprocess.CompletedProcess]:
    work, proc = walks[recipe]
    assert proc.returncode == 0, f"{recipe} failed ({proc.returncode}):\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}"
    return work, proc


def run(work: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["./run.sh", *args], cwd=work, env=ENV, capture_output=True, text=True, timeout=300)


def speakers(d: Path) -> set[str]:
    return set(read_table(d / "utt2spk").values())


def spk(name: str) -> str:
    return client_id(name)[:12]


def test_wav_scp_resamples_wav_with_sox_and_mp3_in_python(corpus, tmp_path):
    """The corpus the recipes read: 16 kHz through sox for the WAV clips, speechkit-resample for the MP3."""
    from speechkit.bin.prepare_corpus import main
    from speechkit.data.datadir import DataDir
    from speechkit.data.audio import read_audio

    assert main(["commonvoice", str(corpus), str(tmp_path / "d"), "--sample-rate", "16000"]) == 0
    d = DataDir.load(tmp_path / "d")
    assert len(d) == 30 and len(d.spk2utt) == 5 and set(d.utt2lang.values()) == {"en"}
    kinds = {v.split()[0] for v in d.wav_scp.values()}
    assert kinds == {"sox", "speechkit-resample"}
    assert sum(v.startswith("speechkit-resample --rate 16000 ") for v in d.wav_scp.values()) == 10
    for utt, spec in list(d.wav_scp.items())[:4]:
        x, sr = read_audio(spec, key=utt)
        assert sr == 16000 and abs(len(x) / sr - d.utt2dur[utt]) < 0.1
    assert d.text[f"{spk('erin')}_common_voice_en_1029"] == "i dont like loud noise"


def test_zerospeech2019(walks, corpus):
    work, proc = walked(walks, "zerospeech2019")
    data = work / "data"
    sets = {x: speakers(data / x) for x in ("train", "dev", "voice", "test")}
    assert sets["voice"] == {spk("alice")}  # the most audio
    assert len(sets["test"]) == 2 and not sets["test"] & (sets["train"] | sets["dev"] | sets["voice"])
    assert sets["train"] | sets["test"] == {spk(c) for c in CLIENTS}
    for x in ("train", "dev", "voice", "test"):
        assert f" data/{x}: {len(read_table(data / x / 'utt2spk'))} utterances" in proc.stdout
    units = work / "exp" / "tiny" / "units"
    assert set(read_table(units / "test" / "codes")) == set(read_table(data / "test" / "utt2spk"))
    assert (units / "voice" / "codes").is_file()
    setup = dict(line.split("=", 1) for line in (data / ".setup").read_text().splitlines())
    assert setup["corpus"] == "commonvoice" and setup["db_root"] == str(corpus)
    # a later stage continues this setup; another corpus is an error naming both
    bad = run(work, "--stage", "1", "--corpus", "mini")
    assert bad.returncode == 1 and "--corpus mini contradicts" in bad.stderr and "corpus=commonvoice" in bad.stderr


def test_tcstar_salad(walks):
    work, proc = walked(walks, "tcstar_salad")
    s = spk("alice")
    assert (work / "data" / "speakers").read_text().split() == [s]
    assert f"speaker {s}: train/dev/test 8/1/1 utterances" in proc.stdout
    ali = read_phone_alignments(work / "exp" / s / "align" / "test" / "phone_alignments")
    assert set(ali) == set(read_table(work / "data" / s / "test" / "utt2spk"))


def test_vctk_continual(walks):
    work, proc = walked(walks, "vctk_continual")
    data = work / "data"
    cont = (data / "continual_speakers").read_text().split()
    pre = (data / "pretrain_speakers").read_text().split()
    assert len(cont) == 2 and len(pre) == 3 and set(cont) | set(pre) == {spk(c) for c in CLIENTS}
    assert "2 continual speakers" in proc.stdout
    for x in ("dev", "test"):
        assert speakers(data / x) == set(cont) | set(pre)  # every speaker has dev and test utterances
    assert (work / "exp" / "align" / "test" / "phone_alignments").stat().st_size > 0


def test_indic_multilingual(walks):
    work, proc = walked(walks, "indic_multilingual")
    data = work / "data" / "commonvoice"
    parts = {x: speakers(data / x) for x in ("train", "dev", "test")}
    assert not parts["train"] & parts["dev"] and not parts["train"] & parts["test"] and not parts["dev"] & parts["test"]
    assert "languages: en" in proc.stdout
    assert (work / "exp" / "commonvoice" / "rnnt_char_wb" / "multisoftmax" / "checkpoints" / "best.pt").is_file()
    setup = dict(line.split("=", 1) for line in (work / "data" / ".setup").read_text().splitlines())
    assert setup["corpus"] == "commonvoice" and setup["speed_perturb"] == "false"
    assert setup["train_config"] == "conf/train_mini.yaml"
