/* Rolling shutter (SPEC section 7), the sensor layer's shared part: the
 * shutter codes and a sensor's poses packed into NUREC_RS_PARAMS reals (each
 * kernel thread packs its sensor's from viewmats and viewmats_end, the ops'
 * inputs, with rs_pack: packing on the host took ~230 small tensor ops a
 * call): the sensor -> world rotations at the start and the end of the
 * frame as unit quaternions (w, x, y, z; the end one in the start's
 * hemisphere) and the sensor centres. The pose at relative time tau is the
 * slerp of the rotations and the lerp of the centres. */
#ifndef NUREC_ROLLING_SHUTTER_H
#define NUREC_ROLLING_SHUTTER_H

enum nurec_shutter {
    NUREC_SHUTTER_GLOBAL = 0,
    NUREC_SHUTTER_TOP_TO_BOTTOM = 1,
    NUREC_SHUTTER_BOTTOM_TO_TOP = 2,
    NUREC_SHUTTER_LEFT_TO_RIGHT = 3,
    NUREC_SHUTTER_RIGHT_TO_LEFT = 4,
};

/* q0 (0-3), q1 (4-7), c0 (8-10), c1 (11-13); 14-15 unused */
#define NUREC_RS_PARAMS 16
/* fixed-point steps of a Gaussian's own time (SPEC 7) */
#define NUREC_RS_STEPS 10

#endif /* NUREC_ROLLING_SHUTTER_H */
