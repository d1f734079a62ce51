"""Continual speaker adaptation (Hemati & Borth 2021): the episode driver and its evaluation.

================================  ===========================================================
module                            what
================================  ===========================================================
:mod:`~.driver`                   ``run_continual``: one episode per speaker, with a strategy of
                                  :mod:`speechkit.train.continual` (``speechkit-train-continual``)
:mod:`~.evaluation`               ``evaluate_continual``: synthesis, speaker verifier, RA / FG per
                                  episode (``speechkit-score-continual``)
================================  ===========================================================

They drive tasks (:mod:`speechkit.tasks.acoustic`, :mod:`speechkit.tasks.tacotron2`), so they sit
in the tasks layer; the strategies (``EWC``, ``ReplayBuffer``, ``EpisodePlan``) stay in
:mod:`speechkit.train.continual`.
"""
