"""User-defined types shared by the unit tests."""


class Point:
    """A user type no Beam coder knows: FastPrimitivesCoder pickles it."""

    def __init__(self, x):
        self.x = x

    def __eq__(self, other):
        return type(other) is Point and other.x == self.x

    def __hash__(self):
        return hash(self.x)

    def __repr__(self):
        return "Point(%r)" % self.x
