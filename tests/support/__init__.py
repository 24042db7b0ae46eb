"""What the service tests share: live stacks (web server, workers), browser helpers, fixtures."""
