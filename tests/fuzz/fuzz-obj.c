/*
 * fuzz-obj.c - libFuzzer target: objects mixed with ranges against
 * tests/vrmodel.h (the program interpreter is tests/objprog.h)
 *
 * Built as a libFuzzer target (meson -Dfuzz=true) and as a plain program
 * that replays the files given on the command line plus generated inputs
 * (the corpus replay test of the unit suite).
 */
#include "../objprog.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	op_run(data, size, true);
	return 0;
}

#ifdef VT_FUZZ_MAIN
#include <dirent.h>

static int replay_file(const char *path)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		return -1;
	static uint8_t buf[1 << 16];
	size_t n = fread(buf, 1, sizeof(buf), f);
	fclose(f);
	LLVMFuzzerTestOneInput(buf, n);
	return 0;
}

int main(int argc, char **argv)
{
	int files = 0;
	for (int i = 1; i < argc; i++) {
		DIR *d = opendir(argv[i]);
		if (!d) {
			if (replay_file(argv[i]) < 0)
				return 1;
			files++;
			continue;
		}
		struct dirent *e;
		while ((e = readdir(d))) {
			char path[4096];
			if (e->d_name[0] == '.')
				continue;
			snprintf(path, sizeof(path), "%s/%s", argv[i], e->d_name);
			if (replay_file(path) < 0)
				return 1;
			files++;
		}
		closedir(d);
	}
	/* and pseudo-random programs */
	uint64_t s = 0x2545F4914F6CDD1Dull;
	static uint8_t buf[4096];
	for (int k = 0; k < 40; k++) {
		for (size_t j = 0; j < sizeof(buf); j++) {
			s ^= s << 13, s ^= s >> 7, s ^= s << 17;
			buf[j] = (uint8_t)s;
		}
		LLVMFuzzerTestOneInput(buf, sizeof(buf));
	}
	printf("replayed %d corpus files and 40 generated programs\n", files);
	return 0;
}
#endif
