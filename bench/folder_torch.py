"""An image folder as ganfw's `data.dataset: folder` reads it, in PyTorch: torchvision's
ImageFolder (one sub-folder per class, classes in name order, labels in that order) whose
loader decodes with PIL and composites any transparency (RGBA, gray + alpha, a palette's
tRNS) over white, as ganfw's data.background default, instead of ImageFolder's own
convert("RGB"), which drops alpha and keeps whatever colour the transparent pixels hold.
Then Resize(size) only when an image is not size x size (on the PIL image: antialiased
bilinear, torchvision's default; the emoji are all 64x64, so none is resized), ToTensor and
Normalize(0.5, 0.5) into [-1, 1] (ganfw's default data.normalize). Shared by
bench/dcgan_quality_torch.py and bench/loader_torch.py; scripts/emoji_jpeg.py composites the
same way.
"""
from PIL import Image
import torch
import torchvision.datasets as datasets
import torchvision.transforms as T


def load_on_white(path):
    """A PIL RGB image of the file at path, its transparency composited over white."""
    with open(path, "rb") as f:
        im = Image.open(f)
        im.load()
    if im.mode in ("RGBA", "LA", "PA") or "transparency" in im.info:
        rgba = im.convert("RGBA")
        white = Image.new("RGBA", rgba.size, (255, 255, 255, 255))
        return Image.alpha_composite(white, rgba).convert("RGB")
    return im.convert("RGB")


class ResizeIfNot:
    """Resize(size) of a PIL image that is not size x size; others pass unchanged."""

    def __init__(self, size):
        self.size = size
        self.resize = T.Resize(size)

    def __call__(self, im):
        return im if im.size == (self.size, self.size) else self.resize(im)


def image_folder(root, size=64):
    """torchvision ImageFolder of root (root/<class>/<image>), images [3,size,size] in [-1,1]."""
    tf = T.Compose([ResizeIfNot(size), T.ToTensor(), T.Normalize((0.5,) * 3, (0.5,) * 3)])
    return datasets.ImageFolder(root, transform=tf, loader=load_on_white)


def folder_tensor(root, size=64):
    """Every image of the folder at once: (images [N,3,size,size] in [-1,1], labels [N]),
    in ImageFolder's order (class, then file name)."""
    ds = image_folder(root, size)
    xs, ys = zip(*(ds[i] for i in range(len(ds))))
    return torch.stack(xs), torch.tensor(ys)
