"""windowing/ and triggers/ must stay engine-agnostic: no pyspark, no grpc."""
import ast
import os

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FORBIDDEN = ('pyspark', 'grpc', 'py4j')


def _modules(package):
  for dirpath, _, files in os.walk(os.path.join(ROOT, package)):
    for f in files:
      if f.endswith('.py'):
        yield os.path.join(dirpath, f)


def _imported_names(path):
  with open(path) as f:
    tree = ast.parse(f.read(), path)
  for node in ast.walk(tree):
    if isinstance(node, ast.Import):
      for a in node.names:
        yield a.name
    elif isinstance(node, ast.ImportFrom) and node.module:
      yield node.module
    elif (isinstance(node, ast.Call) and getattr(node.func, 'id', None) == '__import__'
          and node.args and isinstance(node.args[0], ast.Constant)):
      yield str(node.args[0].value)
    elif (isinstance(node, ast.Call) and getattr(node.func, 'attr', None) == 'import_module'
          and node.args and isinstance(node.args[0], ast.Constant)):
      yield str(node.args[0].value)


@pytest.mark.parametrize('package', ['windowing', 'triggers'])
def test_no_engine_imports(package):
  files = list(_modules(package))
  assert files, package
  bad = [(p, name) for p in files for name in _imported_names(p)
         if name.split('.')[0] in FORBIDDEN]
  assert not bad


def test_checker_detects_a_forbidden_import(tmp_path):
  p = tmp_path / 'm.py'
  p.write_text('import os\nfrom pyspark.sql import functions\n')
  assert 'pyspark.sql' in list(_imported_names(str(p)))
