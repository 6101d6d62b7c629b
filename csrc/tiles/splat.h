/* Constants of Gaussian splatting shared by the rasterizers (camera, lidar):
 * the SPEC section 3 compositing rules, which section 4 reuses "exactly".
 * Plain C, includable from the C++ glue. The per-element math that uses them
 * is in tiles/splat_math.h. */
#ifndef NUREC_SPLAT_H
#define NUREC_SPLAT_H

#define NUREC_SPLAT_ALPHA_MIN (1.0 / 255.0)
#define NUREC_SPLAT_ALPHA_MAX 0.99
#define NUREC_SPLAT_T_MIN 1e-4 /* stop before T would fall below this */
/* Margin on the footprint threshold 2 ln(255 o) (in units of d^T Q d), so
 * that rounding in the per-cell alpha can never reach outside the tiles. */
#define NUREC_SPLAT_THR_MARGIN 0.01
/* Per-item gradient record written by a rasterization backward:
 * gu, gv, gA, gB, gC, go, gdepth, unused (u, v, A, B, C, o, depth as in the
 * tile record, tiles.h). */
#define NUREC_SPLAT_GREC_SIZE 8

/* Long tile lists cut into parts (CUDA): flags in a part's per-cell last
 * entry (seg_last). The part's own compositing reached the transmittance
 * cut-off; the cell's cut-off falls in this part, which is composited again
 * from the cell's transmittance at its start. The rest is the last entry. */
#define NUREC_SPLAT_SEG_STOPPED 0x40000000
#define NUREC_SPLAT_SEG_FIXUP 0x20000000
#define NUREC_SPLAT_SEG_LAST 0x1fffffff
#define NUREC_SPLAT_MAX_SEGMENTS 64

#endif /* NUREC_SPLAT_H */
