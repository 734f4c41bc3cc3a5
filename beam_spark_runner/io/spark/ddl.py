"""Spark's DDL schema strings parsed without Spark: what `ReadFromSpark(schema=
"id int, name string")` reads with, known when the pipeline is built (no
SparkSession then).

`parse_ddl` gives the JSON form of the StructType Spark's own parser
(`StructType.fromDDL`) gives for the same text, for the grammar below;
`tests/data/spark_ddl_cases.json` holds Spark's answers for a list of
cases, which a unit test checks this parser against and an integration
test checks against the Spark installed.

    schema  := "struct<" fields ">" | fields
    fields  := field ("," field)*
    field   := name [":"] type ["NOT NULL"] ["COMMENT" string]
    name    := identifier | `back-quoted` (`` for a back-quote)
    type    := primitive | decimal [(p[, s])] | char(n) | varchar(n)
             | array<type> | map<type, type> | struct<fields>

Keywords and type names are case-insensitive. What Spark accepts beyond
this (interval, variant and collated types, DEFAULT values) is refused,
naming the text: give such a schema as a pyspark StructType.
"""

import re
from typing import List, Optional, Tuple

# Spark's DDL names of its primitive types, and their JSON names.
_PRIMITIVES = {
    "boolean": "boolean",
    "byte": "byte",
    "tinyint": "byte",
    "short": "short",
    "smallint": "short",
    "int": "integer",
    "integer": "integer",
    "long": "long",
    "bigint": "long",
    "float": "float",
    "real": "float",
    "double": "double",
    "string": "string",
    "binary": "binary",
    "date": "date",
    "timestamp": "timestamp",
    "timestamp_ltz": "timestamp",
    "timestamp_ntz": "timestamp_ntz",
}
_DECIMALS = ("decimal", "dec", "numeric")
_TOKEN = re.compile(
    r"\s*(?:(?P<quoted>`(?:[^`]|``)*`)|(?P<string>'(?:[^'\\]|\\.|'')*'|\"(?:[^\"\\]|\\.|\"\")*\")"
    r"|(?P<number>\d+)|(?P<word>[A-Za-z_][A-Za-z0-9_]*)|(?P<punct>[<>(),:]))"
)


class DDLError(ValueError):
    """The text is not a schema this parser reads; the message says where."""


class _Tokens:
    def __init__(self, text: str):
        self.text = text
        self.items: List[Tuple[str, str, int]] = []
        position = 0
        while position < len(text):
            if not text[position:].strip():
                break
            match = _TOKEN.match(text, position)
            if match is None or match.end() == position:
                raise DDLError("unexpected %r at position %d" % (text[position:].strip()[:20], position))
            kind = match.lastgroup
            self.items.append((kind, match.group(kind), match.start(kind)))
            position = match.end()
        self.index = 0

    def peek(self) -> Optional[Tuple[str, str, int]]:
        return self.items[self.index] if self.index < len(self.items) else None

    def take(self) -> Tuple[str, str, int]:
        item = self.peek()
        if item is None:
            raise DDLError("the text ends where a name, a type or a punctuation mark was expected")
        self.index += 1
        return item

    def at_word(self, *words: str) -> bool:
        item = self.peek()
        return item is not None and item[0] == "word" and item[1].lower() in words

    def at_punct(self, mark: str) -> bool:
        item = self.peek()
        return item is not None and item[0] == "punct" and item[1] == mark

    def expect_punct(self, mark: str) -> None:
        kind, value, position = self.take()
        if kind != "punct" or value != mark:
            raise DDLError("expected %r at position %d, found %r" % (mark, position, value))

    def expect_word(self, word: str) -> None:
        kind, value, position = self.take()
        if kind != "word" or value.lower() != word:
            raise DDLError("expected %s at position %d, found %r" % (word.upper(), position, value))

    def number(self) -> int:
        kind, value, position = self.take()
        if kind != "number":
            raise DDLError("expected a number at position %d, found %r" % (position, value))
        return int(value)


def parse_ddl(text: str) -> dict:
    """The StructType (JSON form) of the DDL schema `text`; raises DDLError
    naming what it could not read."""
    tokens = _Tokens(text)
    if tokens.at_word("struct") and len(tokens.items) > 1 and tokens.items[1][1] == "<":
        tokens.take()
        tokens.expect_punct("<")
        fields = _fields(tokens, closing=">")
        tokens.expect_punct(">")
    else:
        fields = _fields(tokens, closing=None)
    rest = tokens.peek()
    if rest is not None:
        raise DDLError("unexpected %r at position %d" % (rest[1], rest[2]))
    if not fields:
        raise DDLError("no columns")
    return {"type": "struct", "fields": fields}


def _fields(tokens: _Tokens, closing: Optional[str]) -> List[dict]:
    fields = []
    if closing is not None and tokens.at_punct(closing):
        return fields
    while True:
        fields.append(_field(tokens))
        if not tokens.at_punct(","):
            return fields
        tokens.take()


def _field(tokens: _Tokens) -> dict:
    kind, value, position = tokens.take()
    if kind == "quoted":
        name = value[1:-1].replace("``", "`")
    elif kind == "word":
        name = value
    else:
        raise DDLError("expected a column name at position %d, found %r" % (position, value))
    if tokens.at_punct(":"):
        tokens.take()
    if tokens.peek() is None:
        raise DDLError("column %r (position %d) has no type" % (name, position))
    spark_type = _type(tokens)
    nullable = True
    metadata = {}
    while tokens.at_word("not", "comment", "default", "collate"):
        word = tokens.take()
        if word[1].lower() == "not":
            tokens.expect_word("null")
            nullable = False
        elif word[1].lower() == "comment":
            kind, value, position = tokens.take()
            if kind != "string":
                raise DDLError("expected a quoted comment at position %d, found %r" % (position, value))
            metadata["comment"] = _unquote(value)
        else:
            raise DDLError(
                "%s (column %r, position %d) is not read here: give the schema as a pyspark StructType"
                % (word[1].upper(), name, word[2])
            )
    return {"name": name, "type": spark_type, "nullable": nullable, "metadata": metadata}


def _type(tokens: _Tokens):
    kind, value, position = tokens.take()
    if kind != "word":
        raise DDLError("expected a type at position %d, found %r" % (position, value))
    word = value.lower()
    if word in _PRIMITIVES:
        return _PRIMITIVES[word]
    if word in _DECIMALS:
        precision, scale = 10, 0
        if tokens.at_punct("("):
            tokens.take()
            precision = tokens.number()
            if tokens.at_punct(","):
                tokens.take()
                scale = tokens.number()
            tokens.expect_punct(")")
        if not 1 <= precision <= 38 or scale > precision:
            raise DDLError(
                "decimal(%d,%d) at position %d: Spark's decimals hold 1 to 38 digits" % (precision, scale, position)
            )
        return "decimal(%d,%d)" % (precision, scale)
    if word in ("char", "varchar"):
        tokens.expect_punct("(")
        length = tokens.number()
        tokens.expect_punct(")")
        return "%s(%d)" % (word, length)
    if word == "array":
        tokens.expect_punct("<")
        element = _type(tokens)
        tokens.expect_punct(">")
        return {"type": "array", "elementType": element, "containsNull": True}
    if word == "map":
        tokens.expect_punct("<")
        key = _type(tokens)
        tokens.expect_punct(",")
        value_type = _type(tokens)
        tokens.expect_punct(">")
        return {"type": "map", "keyType": key, "valueType": value_type, "valueContainsNull": True}
    if word == "struct":
        tokens.expect_punct("<")
        fields = _fields(tokens, closing=">")
        tokens.expect_punct(">")
        return {"type": "struct", "fields": fields}
    raise DDLError(
        "type %r at position %d is not read here: give the schema as a pyspark StructType" % (value, position)
    )


def _unquote(literal: str) -> str:
    quote = literal[0]
    body = literal[1:-1].replace(quote * 2, quote)
    return re.sub(r"\\(.)", lambda m: {"n": "\n", "t": "\t"}.get(m.group(1), m.group(1)), body)


def as_nullable(spark_type):
    """`spark_type` (JSON form) with every part nullable: a column, a
    struct's fields, an array's elements, a map's values. Spark's file
    sources read with a given schema this way (metadata is kept)."""
    if not isinstance(spark_type, dict):
        return spark_type
    kind = spark_type.get("type")
    if kind == "struct":
        return {
            "type": "struct",
            "fields": [dict(f, type=as_nullable(f["type"]), nullable=True) for f in spark_type["fields"]],
        }
    if kind == "array":
        return dict(spark_type, elementType=as_nullable(spark_type["elementType"]), containsNull=True)
    if kind == "map":
        return dict(
            spark_type,
            keyType=as_nullable(spark_type["keyType"]),
            valueType=as_nullable(spark_type["valueType"]),
            valueContainsNull=True,
        )
    return spark_type
