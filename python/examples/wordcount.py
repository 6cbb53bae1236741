"""Word count in Python, PyFlink-style: a text file, Python functions, a keyed rolling sum.

    python python/examples/wordcount.py README.md
"""

import sys

from spate import StreamExecutionEnvironment

env = StreamExecutionEnvironment.get_execution_environment()
counts = (env.read_text_file(sys.argv[1] if len(sys.argv) > 1 else "README.md")
          .flat_map(lambda line: line.lower().split())
          .map(lambda word: (word, 1))
          .key_by(lambda pair: pair[0])
          .sum(1))
final = {}
for word, n in counts.execute_and_collect("word count"):
    final[word] = n
for word, n in sorted(final.items(), key=lambda kv: -kv[1])[:10]:
    print(f"{n:6} {word}")
