"""Densification for examples/train_street.py with gsplat's own strategies
(``DefaultStrategy``: split, clone, prune, opacity reset; ``MCMCStrategy``:
relocation of dead Gaussians and growth up to a cap), read off nurec_ops'
SPEC 8 meta. The street's Gaussians live in their actors' frames; both
strategies' moves (offsets drawn from a Gaussian's own rotation and
scales, copies, deletions) are the same in any frame, so they apply there
unchanged, and each Gaussian's ``track_id`` (and lidar intensity) rides
along as a non-trainable per-Gaussian parameter: a split, cloned, relocated
or added Gaussian takes the id of the Gaussian it copies.

gsplat's MCMC calls two CUDA kernels of its own; they are replaced by
those of ``nurec_ops.gsplat_strategy_ops`` (the relocation in PyTorch, the
covariances nurec_ops' fused op; any device, no CUDA build of gsplat).
"""
import torch

# the trainer's parameter names -> gsplat's (log-scales and opacity logits
# are what gsplat calls "scales" and "opacities")
GS_NAMES = {"means": "means", "quats": "quats", "log_scales": "scales", "opacity_logits": "opacities",
            "colors": "colors"}
PER_GAUSSIAN_DATA = ("track_ids", "intensity")  # in D, resized with the Gaussians


class Densifier:
    def __init__(self, kind, P, D, lr, steps, *, absgrad=False, cap_max=None, width=None, height=None,
                 camera_viewmats=None):
        from gsplat.strategy import DefaultStrategy, MCMCStrategy

        from nurec_ops.gsplat import patch_gsplat_strategy_ops

        self.kind, self.absgrad, self.lr = kind, bool(absgrad), lr
        self.width, self.height = width, height
        self.params = torch.nn.ParameterDict()
        for ours, theirs in GS_NAMES.items():
            self.params[theirs] = torch.nn.Parameter(P[ours].detach())
        for name in PER_GAUSSIAN_DATA:
            self.params[name] = torch.nn.Parameter(D[name], requires_grad=False)
        self.optimizers = {theirs: torch.optim.Adam([self.params[theirs]], lr=lr[ours], eps=1e-15)
                           for ours, theirs in GS_NAMES.items()}
        N = P.means.shape[0]
        # gsplat's schedule (30k steps: refine from 500 every 100 until 15k)
        # scaled to a short run: refine from 1/5 every 1/10 until 7/10, no
        # opacity reset (its recovery takes thousands of steps)
        start, stop, every = max(steps // 5, 1), max(steps * 7 // 10, 2), max(steps // 10, 1)
        if kind == "default":
            self.strategy = DefaultStrategy(refine_start_iter=start, refine_stop_iter=stop, refine_every=every,
                                            reset_every=10 * steps + 1, absgrad=self.absgrad,
                                            grow_grad2d=0.0008 if self.absgrad else 0.0002, verbose=False)
        elif kind == "mcmc":
            self.restore = patch_gsplat_strategy_ops()
            self.strategy = MCMCStrategy(cap_max=int(cap_max or round(1.5 * N)), refine_start_iter=start,
                                         refine_stop_iter=stop, refine_every=every, verbose=False)
        else:
            raise ValueError(f"unknown strategy {kind!r}")
        self.strategy.check_sanity(self.params, self.optimizers)
        if kind == "default":
            # its size thresholds (grow by cloning below 1% of the scene's
            # scale, else split) are relative to the scene's scale: gsplat's
            # trainer takes 1.1x the cameras' largest distance from their centre
            V = D.cam_viewmats if camera_viewmats is None else camera_viewmats  # every camera pose of the run
            centres = -torch.einsum("fji,fj->fi", V[:, :3, :3], V[:, :3, 3])
            scale = 1.1 * float((centres - centres.mean(0)).norm(dim=-1).max()) if centres.shape[0] > 1 else 1.0
            self.state = self.strategy.initialize_state(scene_scale=max(scale, 1e-3))
        else:
            self.state = self.strategy.initialize_state()
        self.sync(P, D)

    def info(self, meta, width=None, height=None):
        """What gsplat's strategies read from a render (gsplat's ``info``);
        width and height default to the constructor's."""
        return {"means2d": meta.means2d, "radii": meta.radii, "width": width or self.width,
                "height": height or self.height, "n_cameras": meta.means2d.shape[0], "gaussian_ids": None}

    def pre_backward(self, step, info):
        self.strategy.step_pre_backward(self.params, self.optimizers, self.state, step, info)

    def step(self, step, info, P, D):
        """The optimizers' step, then the strategy's (which may change the
        number of Gaussians), then the trainer's views of the parameters."""
        for opt in self.optimizers.values():
            opt.step()
        if self.kind == "default":
            self.strategy.step_post_backward(self.params, self.optimizers, self.state, step, info, packed=False)
        else:
            self.strategy.step_post_backward(self.params, self.optimizers, self.state, step, info,
                                             lr=self.lr["means"])
        for opt in self.optimizers.values():
            opt.zero_grad(set_to_none=True)
        self.sync(P, D)

    def regularization(self, P):
        """MCMC's opacity and scale regularizers (gsplat's simple trainer's
        0.01 each): without them dead Gaussians are never freed."""
        if self.kind != "mcmc":
            return 0.0
        return 0.01 * torch.sigmoid(P.opacity_logits).mean() + 0.01 * torch.exp(P.log_scales).mean()

    def sync(self, P, D):
        for ours, theirs in GS_NAMES.items():
            P[ours] = self.params[theirs]
        for name in PER_GAUSSIAN_DATA:
            D[name] = self.params[name].data

    def count(self):
        return int(self.params["means"].shape[0])
