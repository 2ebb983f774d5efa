#!/usr/bin/env python3
"""Train torchvision's ResNet-50 on an ImageFolder-style folder.

train_resnet50.py feeds it with stokehold, train_resnet50_dataloader.py with a PyTorch
DataLoader; they differ only in the lines `diff train_resnet50_dataloader.py
train_resnet50.py` shows. Without --data both run on stokehold's built-in demo images;
--steps limits the steps per epoch.
"""
import argparse
import time
from pathlib import Path

try:
    import torch
    import torchvision
except ImportError as e:  # the example trains with PyTorch
    raise SystemExit(f"{e}: this example needs PyTorch and torchvision (pip install torch torchvision)")
import torchvision.transforms as T
from stokehold import builtin_data


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", type=Path, help="training folder, one sub-folder per class (default: the demo images)")
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--steps", type=int, default=3, help="steps per epoch at most (0: whole epochs)")
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--workers", type=int, default=2, help="loader processes/threads")
    ap.add_argument("--lr", type=float, default=0.1)
    args = ap.parse_args()
    data = args.data or Path(builtin_data())
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    torch.manual_seed(1)

    transform = T.Compose([T.RandomResizedCrop(224), T.RandomHorizontalFlip(), T.ToTensor(), T.Normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225])])
    dataset = torchvision.datasets.ImageFolder(data, transform)
    loader = torch.utils.data.DataLoader(dataset, batch_size=args.batch, shuffle=True, num_workers=args.workers, pin_memory=device.type == "cuda", persistent_workers=args.workers > 0)

    classes, _ = torchvision.datasets.folder.find_classes(data)
    model = torchvision.models.resnet50(num_classes=len(classes)).to(device)
    criterion = torch.nn.CrossEntropyLoss()
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9, weight_decay=1e-4)
    model.train()
    for epoch in range(args.epochs):
        t0, seen = time.perf_counter(), 0
        for step, (images, labels) in enumerate(loader):
            images, labels = images.to(device, non_blocking=True), labels.to(device, non_blocking=True)
            loss = criterion(model(images), labels)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            seen += len(images)
            print(f"epoch {epoch} step {step} loss {loss.item():.3f} ({seen / (time.perf_counter() - t0):.1f} img/s)", flush=True)
            if step + 1 == args.steps:
                break


if __name__ == "__main__":
    main()
