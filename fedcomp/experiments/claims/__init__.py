"""The paper experiments' claims: one module per built-in experiment that tests one.

A module ``NAME.py`` here judges the experiment ``fedcomp/configs/NAME.toml``: its
``verdict(finals, config) -> (verdict, rule)`` (the rule's vocabulary is
:mod:`fedcomp.experiments._verdict`), and, for a timing experiment, ``check_config`` and
``run``. The pipeline finds the module by the experiment's name
(:func:`fedcomp.experiments.rule_module`), so adding a claim touches no list.
"""
