from biasaudit.cli import main

if __name__ == "__main__":  # imported (a docs generator inspecting the package): nothing runs
    main()
