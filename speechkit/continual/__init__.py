"""Continual speaker adaptation (Hemati & Borth 2021): the episode driver and its evaluation.

================================  ===========================================================
module                            what
================================  ===========================================================
:mod:`~.driver`                   ``run_continual``: one episode per speaker, with a strategy of
                                  :mod:`speechkit.train.continual_strategies`
                                  (``speechkit-train-continual``)
:mod:`~.evaluation`               ``evaluate_continual``: synthesis, speaker verifier, RA / FG per
                                  episode (``speechkit-score-continual``)
================================  ===========================================================

They drive tasks (:mod:`speechkit.tasks.acoustic`, :mod:`speechkit.tasks.tacotron2`) and the
evaluation synthesizes (:class:`speechkit.inference.text2speech.Synthesizer`), so they sit above
the inference layer; the strategies (``EWC``, ``ReplayBuffer``, ``EpisodePlan``, the speaker
orders) are training tools of :mod:`speechkit.train.continual_strategies`.
"""
