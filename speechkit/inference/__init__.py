"""A trained model applied to utterances (ESPnet2's ``Speech2Text`` habit) and to a data dir in parts.

Each class is built once from an experiment dir and a checkpoint choice, then called per utterance;
beside it, the job that applies it to a whole data dir (behind a ``speechkit-*`` command):

=================================  ===============================================  ===========================
module                             built once, called per utterance                 over a data dir
=================================  ===============================================  ===========================
:mod:`.speech2text`                ``Recognizer`` (RNN-T; ``DecodeOptions``)        :mod:`.speech2text_dir`
                                                                                    (``speechkit-asr-decode``)
:mod:`.speech2units`               ``UnitExtractor`` (VQ-VAE codes, z)              ``extract_units``
:mod:`.units2speech`               ``Resynthesizer`` (inverter + Griffin-Lim)       ``resynthesize``
:mod:`.speaker_embeddings`         the GE2E speaker encoder                         ``embed_speakers``
:mod:`.frame_labels`               a fitted label front end                         ``make_labels``
=================================  ===============================================  ===========================

:mod:`.parts` is the one way a model goes over a data dir in parts (split, fingerprint, skip what
is current, worker processes, merge). The modules import nothing at package import; import the one
you use (``from speechkit.inference.speech2text import Recognizer``).
"""
