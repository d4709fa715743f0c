"""Exploration: Hypothesis fault schedules against real trials, shrunk; the chaos
baseline; replaying a schedule; the regression tests it exports; re-judging stored
histories.

    strategy    Hypothesis strategies over schedules (harness.schedule)
    search      the Explorer: each schedule decided once, k-of-n confirmation, flaky
                findings kept, one finding per kind of failure (the invariants it
                broke), each shrunk by Hypothesis on its own; the random baseline
    trials      one schedule as one real trial on a run's infrastructure
    regression  the pytest file a finding exports, and what it calls
    recheck     stored histories judged again by today's oracle
"""
