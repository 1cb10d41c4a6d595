#!/usr/bin/env bash
# Builds the Java client's jar with the JDK alone (no Maven needed):
#   clients/java/build.sh          -> clients/java/build/flakeid-client.jar
#   clients/java/build.sh test     -> the jar, then the JUnit 4 tests (Debian's
#                                     junit4 and libhamcrest-java), against a
#                                     live `flakeid serve` built from this
#                                     repository (or $FLAKEID_TEST_BIN)
#   clients/java/build.sh bench URL [seconds] [rounds]
#                                  -> the jar, then LocalBench (src/bench) against
#                                     the server at URL
# Maven users build the same with pom.xml.
set -euo pipefail
cd "$(dirname "$0")"
rm -rf build
mkdir -p build/classes build/test-classes
javac --release 17 -encoding UTF-8 -Xlint:all -Werror -d build/classes $(find src/main/java -name '*.java')
jar --create --file build/flakeid-client.jar -C build/classes .
if [ "${1:-}" = test ]; then
  cp=/usr/share/java/junit4.jar:/usr/share/java/hamcrest-core.jar
  javac --release 17 -encoding UTF-8 -d build/test-classes -cp "build/classes:$cp" $(find src/test/java -name '*.java')
  java -Dfile.encoding=UTF-8 -cp "build/classes:build/test-classes:$cp" org.junit.runner.JUnitCore io.github.flakeid.client.ClientTest io.github.flakeid.client.LocalGeneratorTest
fi
if [ "${1:-}" = bench ]; then
  mkdir -p build/bench-classes
  javac --release 17 -encoding UTF-8 -d build/bench-classes -cp build/classes $(find src/bench/java -name '*.java')
  shift
  java -Dfile.encoding=UTF-8 -cp build/classes:build/bench-classes io.github.flakeid.client.LocalBench "$@"
fi
