/* Philox 4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC'11),
 * header-only so that C kernels and CUDA kernels share one definition. Block b of the
 * stream of `seed` is ganfw_philox4x32_10({low32(b), high32(b), 0, 0}, {low32(seed),
 * high32(seed)}): four 32-bit words per block. */
#ifndef GANFW_PHILOX_H
#define GANFW_PHILOX_H

#include <stdint.h>

#ifdef __CUDACC__
#define GANFW_HD __host__ __device__
#else
#define GANFW_HD
#endif

#define GANFW_PHILOX_M0 0xD2511F53u /* round multipliers */
#define GANFW_PHILOX_M1 0xCD9E8D57u
#define GANFW_PHILOX_W0 0x9E3779B9u /* key schedule (Weyl) increments */
#define GANFW_PHILOX_W1 0xBB67AE85u

/* One Philox round: two 32x32->64 multiplies, the halves crossed and keyed. */
GANFW_HD static inline void ganfw_philox_round(uint32_t c[4], uint32_t k0, uint32_t k1) {
  uint64_t p0 = (uint64_t)GANFW_PHILOX_M0 * c[0];
  uint64_t p1 = (uint64_t)GANFW_PHILOX_M1 * c[2];
  uint32_t hi0 = (uint32_t)(p0 >> 32), lo0 = (uint32_t)p0;
  uint32_t hi1 = (uint32_t)(p1 >> 32), lo1 = (uint32_t)p1;
  uint32_t n0 = hi1 ^ c[1] ^ k0;
  uint32_t n2 = hi0 ^ c[3] ^ k1;
  c[0] = n0;
  c[1] = lo1;
  c[2] = n2;
  c[3] = lo0;
}

/* out = Philox4x32-10(ctr, key). out may alias ctr. */
GANFW_HD static inline void ganfw_philox4x32_10(const uint32_t ctr[4], const uint32_t key[2],
                                                uint32_t out[4]) {
  uint32_t c[4] = {ctr[0], ctr[1], ctr[2], ctr[3]};
  uint32_t k0 = key[0], k1 = key[1];
  for (int r = 0; r < 10; r++) {
    ganfw_philox_round(c, k0, k1);
    k0 += GANFW_PHILOX_W0;
    k1 += GANFW_PHILOX_W1;
  }
  out[0] = c[0];
  out[1] = c[1];
  out[2] = c[2];
  out[3] = c[3];
}

/* The four words of block `block` of the stream of `seed` (the counter convention above). */
GANFW_HD static inline void ganfw_philox_block(uint64_t seed, uint64_t block, uint32_t out[4]) {
  uint32_t ctr[4] = {(uint32_t)block, (uint32_t)(block >> 32), 0u, 0u};
  uint32_t key[2] = {(uint32_t)seed, (uint32_t)(seed >> 32)};
  ganfw_philox4x32_10(ctr, key, out);
}

/* Uniform float in [0, 1) from the top 24 bits: (x >> 8) * 2^-24, exact in f32. */
GANFW_HD static inline float ganfw_philox_u01(uint32_t x) {
  return (float)(x >> 8) * (1.0f / 16777216.0f);
}

/* Uniform float in (0, 1]: ((x >> 8) + 1) * 2^-24, safe to take the log of. */
GANFW_HD static inline float ganfw_philox_u01_open0(uint32_t x) {
  return (float)((x >> 8) + 1u) * (1.0f / 16777216.0f);
}

#endif
