"""A clock and sleep for the source planner's tests: sleeping moves the
clock, so a test sees every wait the planner made (`slept`, seconds)."""

SECOND = 10**6


class PlanningClock:
    def __init__(self, micros):
        self.micros = micros
        self.slept = []

    def __call__(self):
        return self.micros

    def sleep(self, seconds):
        self.slept.append(seconds)
        self.micros += int(seconds * SECOND)
