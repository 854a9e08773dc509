from biasaudit.cli import main

main()
