# Convenience wrapper around CMake; scripts/run.sh is what the README and CI use.
.PHONY: all test asan demo clean
all:
	cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null && cmake --build build -j2
test: all
	ctest --test-dir build --output-on-failure -j2
asan:
	cmake -S . -B build-asan -DCOLLIE_SANITIZE=ON >/dev/null && cmake --build build-asan -j2
	COLLIE_TEST_TIMEOUT_MULT=3 ctest --test-dir build-asan --output-on-failure -j2
demo: all
	./build/collierun -n 4 ./build/collie-demo
clean:
	rm -rf build build-asan build-tsan
