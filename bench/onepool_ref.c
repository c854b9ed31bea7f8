/* The speed reference of `flashlab bench --only onepool`: a plain page-mapped FTL in C
 * with one GC pool (one die, one plane), greedy victims kept in buckets by valid count
 * (doubly linked lists, O(1) per invalidation, the victim from the lowest non-empty
 * bucket), separate host and GC write frontiers, GC when fewer than 2 blocks are free.
 * Uniform random 4 KiB writes: a sequential fill, a warm-up of one capacity of random
 * writes, then one capacity measured. Prints host writes per second and WAF of the
 * measured phase as JSON. With `scan` as a fifth argument the victim is found the plainest
 * way instead: a linear scan of every closed block's valid count (no buckets to keep up
 * on each invalidation; the faster of the two on small drives).
 *
 *   gcc -O2 -o onepool_ref bench/onepool_ref.c && ./onepool_ref 4294967296 0.07 64 1 [scan]
 *
 * args: logical bytes, over-provisioning, pages per block, seed, [victim choice]. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static uint32_t ppb, nblocks;
static int32_t *l2p, *p2l;
static uint32_t *valid, *next_b, *prev_b, *head; /* buckets by valid count */
static uint8_t *closed;
static uint32_t *free_stack, nfree;
static uint64_t flash_writes, host_writes;
static int scan; /* victims by linear scan instead of buckets */
#define NONE 0xFFFFFFFFu

static void bucket_remove(uint32_t b) {
  if (scan) return;
  uint32_t v = valid[b];
  if (prev_b[b] != NONE) next_b[prev_b[b]] = next_b[b]; else head[v] = next_b[b];
  if (next_b[b] != NONE) prev_b[next_b[b]] = prev_b[b];
}
static void bucket_insert(uint32_t b) {
  if (scan) return;
  uint32_t v = valid[b];
  prev_b[b] = NONE; next_b[b] = head[v];
  if (head[v] != NONE) prev_b[head[v]] = b;
  head[v] = b;
}

struct frontier { uint32_t block, page; };
static struct frontier host_f, gc_f;

static uint32_t take_free(void) { return free_stack[--nfree]; }

static void program(struct frontier *f, int32_t lpn);

static void gc(void) {
  while (nfree < 2) {
    uint32_t b = NONE;
    if (scan) {
      uint32_t best = ppb + 1;
      for (uint32_t c = 0; c < nblocks; c++)
        if (closed[c] && valid[c] < best) { best = valid[c]; b = c; }
      if (b == NONE) { fprintf(stderr, "no victim\n"); exit(1); }
    } else {
      uint32_t v = 0;
      while (v <= ppb && head[v] == NONE) v++;
      if (v > ppb) { fprintf(stderr, "no victim\n"); exit(1); }
      b = head[v];
    }
    bucket_remove(b);
    closed[b] = 0;
    for (uint32_t p = 0; p < ppb; p++) {
      int32_t lpn = p2l[(uint64_t)b * ppb + p];
      if (lpn >= 0) program(&gc_f, lpn);
    }
    valid[b] = 0;
    free_stack[nfree++] = b;
  }
}

static void program(struct frontier *f, int32_t lpn) {
  if (f->page == ppb) {
    closed[f->block] = 1;
    bucket_insert(f->block);
    f->block = take_free();
    f->page = 0;
  }
  int32_t old = l2p[lpn];
  if (old >= 0) {
    uint32_t ob = (uint32_t)old / ppb;
    p2l[old] = -1;
    if (closed[ob] && !scan) { bucket_remove(ob); valid[ob]--; bucket_insert(ob); } else valid[ob]--;
  }
  uint64_t ppn = (uint64_t)f->block * ppb + f->page++;
  p2l[ppn] = lpn;
  l2p[lpn] = (int32_t)ppn;
  valid[f->block]++;
  flash_writes++;
}

static void host_write(int32_t lpn) {
  host_writes++;
  if (host_f.page == ppb && nfree < 3) gc();
  program(&host_f, lpn);
}

static uint64_t rng_state;
static uint64_t next_u64(void) { /* splitmix64 */
  uint64_t z = (rng_state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

int main(int argc, char **argv) {
  if (argc != 5 && !(argc == 6 && strcmp(argv[5], "scan") == 0)) {
    fprintf(stderr, "usage: %s logical_bytes op pages_per_block seed [scan]\n", argv[0]);
    return 2;
  }
  scan = argc == 6;
  uint64_t logical = strtoull(argv[1], 0, 10);
  double op = atof(argv[2]);
  ppb = (uint32_t)atoi(argv[3]);
  rng_state = strtoull(argv[4], 0, 10);
  uint32_t n = (uint32_t)(logical / 4096);
  nblocks = (uint32_t)((n * (1.0 + op) + ppb - 1) / ppb);
  l2p = malloc(sizeof(int32_t) * n);
  p2l = malloc(sizeof(int32_t) * (uint64_t)nblocks * ppb);
  valid = calloc(nblocks, 4); next_b = malloc(4 * nblocks); prev_b = malloc(4 * nblocks);
  closed = calloc(nblocks, 1); head = malloc(4 * (ppb + 1)); free_stack = malloc(4 * nblocks);
  for (uint32_t i = 0; i < n; i++) l2p[i] = -1;
  for (uint64_t i = 0; i < (uint64_t)nblocks * ppb; i++) p2l[i] = -1;
  for (uint32_t v = 0; v <= ppb; v++) head[v] = NONE;
  for (uint32_t b = 0; b < nblocks; b++) free_stack[nfree++] = nblocks - 1 - b;
  host_f.block = take_free(); host_f.page = 0;
  gc_f.block = take_free(); gc_f.page = 0;
  for (uint32_t i = 0; i < n; i++) host_write((int32_t)i);
  for (uint32_t i = 0; i < n; i++) host_write((int32_t)(next_u64() % n));
  host_writes = flash_writes = 0;
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  for (uint32_t i = 0; i < n; i++) host_write((int32_t)(next_u64() % n));
  clock_gettime(CLOCK_MONOTONIC, &t1);
  double s = (t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9;
  printf("{\"host_writes\": %llu, \"seconds\": %.6f, \"host_writes_per_s\": %.0f, \"waf\": %.4f}\n",
         (unsigned long long)host_writes, s, host_writes / s, (double)flash_writes / host_writes);
  return 0;
}
