"""The emulator's op rules, one file per rule family (spec_tests/test_rule_homes.py checks the arrangement).

Each test_<family>.py names its rule at the top: RULES, the rule functions of refimpl/emulator/alu.py whose home it is;
DECISIONS, the rows of refimpl.spec.DECISIONS (SPEC.md "Decisions") it holds, each with the test that states the row;
ALSO, rule functions whose home is another file but part of which this family tests. ints.py, floats.py, casts.py and
arrays.py are the oracles and shortcuts that several families share.
"""
