/* Camera models of SPEC section 6 (the sensor layer): the model codes and
 * the layout of each camera's packed parameters, shared by the glue, the
 * CPU and the CUDA paths. One header per model holds its projection
 * (camera_<model>_generic.h), written once in jet arithmetic (jet_generic.h)
 * so that its Jacobian and the Jacobian's VJP (what the EWA covariance's
 * gradient needs) come from the same code; camera_models_generic.h
 * dispatches on the model with a plain switch.
 *
 * Adding a model: its code and parameter layout here (NUREC_CAM_LAST the
 * largest code), a header with its projection and valid field, a case in
 * camera_models_generic.h's two switches, its packing in
 * nurec_ops/_camera_models.py, its reference in
 * nurec_ops/reference/camera_models.py, and a row in
 * tests/test_camera_models_fused.py's MODELS (camera_ortho_generic.h is the
 * smallest such model). */
#ifndef NUREC_CAMERA_MODELS_H
#define NUREC_CAMERA_MODELS_H

enum nurec_camera_model {
    NUREC_CAM_PINHOLE = 0, /* SPEC 3: Ks only, no packed parameters */
    NUREC_CAM_OPENCV = 1,
    NUREC_CAM_FISHEYE = 2,
    NUREC_CAM_FTHETA = 3,
    NUREC_CAM_ORTHO = 4, /* gsplat's orthographic camera: Ks only (packed parameters all 0) */
};
#define NUREC_CAM_LAST NUREC_CAM_ORTHO /* the largest code (the glue's range check) */

/* Packed parameters per camera, [C, NUREC_CAM_PARAMS] reals (unused slots 0).
 * opencv:  k1..k6 (0-5), p1 p2 (6-7), s1..s4 (8-11), max radius of
 *          (x/z, y/z) (12; the first radius where r d(r) stops increasing);
 *          fx fy cx cy from Ks
 * fisheye: k1..k4 (0-3), max angle (4); fx fy cx cy from Ks
 * ftheta:  cx cy (0-1), angle_to_pixel c0..c5 (2-7), c d e (8-10),
 *          max angle (11), reference polynomial 1 or 2 (12),
 *          pixel_to_angle c0..c5 (13-18, used when 12 is 1)
 * ortho:   none; fx fy cx cy from Ks */
#define NUREC_CAM_PARAMS 20
#define NUREC_FTHETA_NEWTON_STEPS 10

#endif /* NUREC_CAMERA_MODELS_H */
