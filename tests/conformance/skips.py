"""Beam tests this runner cannot pass yet, each with the reason and the issue
that will enable it. A test leaves this list when its feature lands."""

FN_API_RUNNER_SKIPS = {
}

_TEST_STREAM = "uses TestStream, which needs the streaming runner: issue #5"

# "module.TestCaseClass" -> {test name: reason}
BEAM_SUITE_SKIPS = {
    "sideinputs_test.SideInputsTest": {
        "test_multi_triggered_gbk_side_input": _TEST_STREAM,
    },
}
