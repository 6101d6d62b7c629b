/* Ends one precision of math/generic.h: its names go, so that the next
 * precision (or the next generic file) defines them afresh. Included by
 * generic.h after each of its two passes; no include guard, on purpose. */
#undef real_t
#undef NR
#undef R_DTYPE
#undef R_IS_F64
#undef R_SQRT
#undef R_EXP
#undef R_EXP_FALLOFF
#undef R_EXP_STAGED
#undef R_STAGED_SCALE
#undef R_RCP_NORMAL
#undef R_EXPM1
#undef R_LOG
#undef R_LOG1P
#undef R_SIN
#undef R_COS
#undef R_ATAN2
#undef R_FABS
#undef R_FMAX
#undef R_FMIN
#undef R_CEIL
#undef R_FLOOR
#undef R_FMA
