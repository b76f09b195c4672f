MODULE WarpGuardShared
    ! Add to the robot program's task T_ROB1 (the user's program stays as it is otherwise).
    ! The same PERS declarations as in WarpGuard.mod: persistent variables with the same name and type
    ! are one shared value across tasks (CONFIRMED).
    PERS num wg_cycle:=0;
    PERS bool wg_record:=FALSE;
    PERS num wg_payload:=0;

    ! Call at the start of every cycle of the main program, e.g. as the first line of its loop:
    !     WgCycleStart;
    ! A counter, not a flag: a cycle start is never lost even if the background task is busy.
    PROC WgCycleStart()
        wg_cycle:=wg_cycle+1;
    ENDPROC

    ! With the payload option (warpguard script --payload): call next to every GripLoad with the
    ! same load, e.g. "GripLoad piece; WgPayload piece;", and "WgPayload load0;" after a release.
    ! UNCONFIRMED: no instruction was found that lets the background task read the active load itself.
    PROC WgPayload(loaddata load)
        wg_payload:=load.mass;
    ENDPROC
ENDMODULE
